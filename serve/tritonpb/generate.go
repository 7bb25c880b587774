// Package tritonpb is the part of Triton Inference Server's model
// configuration that drainpipe's model repository reads from a model's
// config.pbtxt, generated from model_config.proto. The generated file is
// committed, so building needs no protoc.
package tritonpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative model_config.proto
