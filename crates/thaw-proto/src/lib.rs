//! Generated code for the `thaw.v1` protocol. The `.proto` files in `proto/` are
//! the only protocol source; nothing here is written by hand.

/// The `thaw.v1` package: messages, the master gRPC service, data-plane frames.
pub mod v1 {
    tonic::include_proto!("thaw.v1");
}

/// Version carried by data-plane requests (`DataRequest.version`) that use
/// nothing of version 2.
pub const DATA_PROTOCOL_VERSION: u32 = 1;
/// Version 2: segmented writes (`WriteFileRequest.first_block`, the
/// store-no-more mark, `LocalWriteStep.ufs_bytes`; see proto/thaw/v1/data.proto).
/// A worker serves versions 1 through this one.
pub const DATA_PROTOCOL_SEGMENTS: u32 = 2;
