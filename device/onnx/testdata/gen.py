#!/usr/bin/python3
"""Generates the ONNX test models of drainpipe's onnx device.

Run from this folder with Debian 12's python3-onnx (1.12) and python3-numpy:

    /usr/bin/python3 gen.py

mlp.onnx         features float[batch,64] -> Gemm+ReLU, Gemm+ReLU, Gemm, Softmax
                 -> probabilities float[batch,10], class int64[batch] (ArgMax)
mixed.onnx       a float[batch,4], b int64[batch,2], c double[batch,3], d int32[batch,1]
                 -> total double[batch] (every value cast to double and summed),
                    twice_d int32[batch,1]
fixed_batch.onnx x float[8,4] -> y float[8,4] (Identity): a model with a fixed batch size
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 13)]


def save(graph, name):
    model = helper.make_model(graph, opset_imports=OPSET, producer_name="drainpipe-testdata")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, name)


def mlp():
    rng = np.random.default_rng(64)
    sizes = [64, 256, 256, 10]
    inits, nodes, x = [], [], "features"
    for i in range(3):
        w = (rng.standard_normal((sizes[i], sizes[i + 1])) * np.sqrt(2 / sizes[i])).astype(np.float32)
        b = (rng.standard_normal(sizes[i + 1]) * 0.1).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [f"z{i}"]))
        x = f"z{i}"
        if i < 2:
            nodes.append(helper.make_node("Relu", [x], [f"h{i}"]))
            x = f"h{i}"
    nodes.append(helper.make_node("Softmax", [x], ["probabilities"], axis=1))
    nodes.append(helper.make_node("ArgMax", ["probabilities"], ["class"], axis=1, keepdims=0))
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 10]),
         helper.make_tensor_value_info("class", TensorProto.INT64, ["batch"])],
        inits)
    save(graph, "mlp.onnx")


def mixed():
    nodes = []
    parts = []
    for name, in_type in [("a", TensorProto.FLOAT), ("b", TensorProto.INT64), ("c", TensorProto.DOUBLE), ("d", TensorProto.INT32)]:
        nodes.append(helper.make_node("Cast", [name], [name + "64"], to=TensorProto.DOUBLE))
        nodes.append(helper.make_node("ReduceSum", [name + "64", "axis1"], [name + "_sum"], keepdims=0))
        parts.append(name + "_sum")
    nodes.append(helper.make_node("Sum", parts, ["total"]))
    nodes.append(helper.make_node("Add", ["d", "d"], ["twice_d"]))
    graph = helper.make_graph(
        nodes, "mixed",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("b", TensorProto.INT64, ["batch", 2]),
         helper.make_tensor_value_info("c", TensorProto.DOUBLE, ["batch", 3]),
         helper.make_tensor_value_info("d", TensorProto.INT32, ["batch", 1])],
        [helper.make_tensor_value_info("total", TensorProto.DOUBLE, ["batch"]),
         helper.make_tensor_value_info("twice_d", TensorProto.INT32, ["batch", 1])],
        [numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1")])
    save(graph, "mixed.onnx")


def fixed_batch():
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "fixed_batch",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 4])])
    save(graph, "fixed_batch.onnx")


if __name__ == "__main__":
    mlp()
    mixed()
    fixed_batch()
