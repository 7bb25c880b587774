// Package serve is a model server speaking the Open Inference Protocol
// (v2, KServe's "V2" and Triton's HTTP/gRPC API) over REST and gRPC, each
// model behind its own online batcher ([online.Batcher]).
//
// Tensors map to a model's Arrow input columns by name: a primitive column
// is a tensor of shape [n], a fixed_size_list<T>[k] column one of shape
// [n, k], n the rows of the request. Outputs come back the same way. A
// request is checked whole (names, datatypes, shapes, element counts,
// non-finite floats) before its rows join a batch, so a bad request fails
// alone and never reaches the device.
//
// Failures map to HTTP statuses and gRPC codes by [Code]: a request that
// can never succeed is 400 / INVALID_ARGUMENT, an unknown model or version
// 404 / NOT_FOUND, a body over the size bound 413 / RESOURCE_EXHAUSTED, a
// full queue 429 / RESOURCE_EXHAUSTED, a passed deadline 504 /
// DEADLINE_EXCEEDED, a server starting or draining 503 / UNAVAILABLE.
//
// Beside the protocol, POST /v1/embeddings and GET /v1/models answer as
// OpenAI's API does (its request fields, answers, base64 encoding and
// error shape), for the clients that embed text; [WithAPIKeys] asks
// them for a bearer token.
//
// [Server.Run] serves until its context ends, then drains: readiness turns
// false, the listeners stop taking requests, the requests taken are
// answered, and each model's sessions shut down exactly once.
package serve
