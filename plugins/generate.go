package plugins

// The generated code is committed; tests and builds never need protoc.
// Regenerate (protoc 3.21+, protoc-gen-go v1.36.12, protoc-gen-go-grpc) with:
//
//	go generate ./plugins
//
//go:generate protoc --proto_path=proto --go_out=internal/pb --go_opt=paths=source_relative --go-grpc_out=internal/pb --go-grpc_opt=paths=source_relative provider.proto
