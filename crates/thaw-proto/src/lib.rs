//! Generated code for the `thaw.v1` protocol. The `.proto` files in `proto/` are
//! the only protocol source; nothing here is written by hand.

/// The `thaw.v1` package: messages, the master gRPC service, data-plane frames.
pub mod v1 {
    tonic::include_proto!("thaw.v1");
}

/// Version carried by every data-plane request (`DataRequest.version`).
pub const DATA_PROTOCOL_VERSION: u32 = 1;
