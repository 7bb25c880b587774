// Package inferencepb is the Open Inference Protocol's gRPC messages and
// service, generated from open_inference.proto. The generated files are
// committed, so building needs no protoc.
package inferencepb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative open_inference.proto
