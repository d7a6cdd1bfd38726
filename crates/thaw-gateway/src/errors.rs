//! Thaw's errors as S3's: each kind to the S3 code a client acts on, with
//! Thaw's message kept (it says what to do).

use s3s::{S3Error, S3ErrorCode};
use thaw_common::{ErrorKind, ThawError};

/// What an object operation's error means to an S3 client.
pub fn object_error(e: ThawError) -> S3Error {
    let code = match e.kind {
        // A directory, or a file still being written, is no object.
        ErrorKind::NotFound | ErrorKind::IsADirectory | ErrorKind::FailedPrecondition => S3ErrorCode::NoSuchKey,
        ErrorKind::NotADirectory | ErrorKind::InvalidArgument | ErrorKind::AlreadyExists => {
            S3ErrorCode::InvalidArgument
        }
        ErrorKind::PermissionDenied => S3ErrorCode::AccessDenied,
        ErrorKind::DirectoryNotEmpty => S3ErrorCode::InvalidRequest,
        ErrorKind::ResourceExhausted | ErrorKind::Unavailable | ErrorKind::Timeout => S3ErrorCode::ServiceUnavailable,
        ErrorKind::DataLost | ErrorKind::Internal => S3ErrorCode::InternalError,
    };
    S3Error::with_message(code, e.message)
}

/// A bucket operation's error: a missing directory is `NoSuchBucket`.
pub fn bucket_error(e: ThawError) -> S3Error {
    match e.kind {
        ErrorKind::NotFound | ErrorKind::NotADirectory => S3Error::with_message(S3ErrorCode::NoSuchBucket, e.message),
        ErrorKind::DirectoryNotEmpty => S3Error::with_message(S3ErrorCode::BucketNotEmpty, e.message),
        _ => object_error(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_the_codes_clients_act_on() {
        assert_eq!(*object_error(ThawError::not_found("x")).code(), S3ErrorCode::NoSuchKey);
        assert_eq!(*object_error(ThawError::permission_denied("x")).code(), S3ErrorCode::AccessDenied);
        assert_eq!(*object_error(ThawError::unavailable("x")).code(), S3ErrorCode::ServiceUnavailable);
        assert_eq!(*bucket_error(ThawError::not_found("x")).code(), S3ErrorCode::NoSuchBucket);
        let e = bucket_error(ThawError::new(ErrorKind::DirectoryNotEmpty, "has files"));
        assert_eq!((e.code().clone(), e.message()), (S3ErrorCode::BucketNotEmpty, Some("has files")));
    }
}
