//! One error type for all of Thaw: a kind (stable, mapped to gRPC codes, data-plane
//! codes and later to Python exceptions) and a message meant for a person.

use crate::proto::ErrorCode;

/// What went wrong, independent of transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    NotFound,
    AlreadyExists,
    InvalidArgument,
    PermissionDenied,
    /// A tier or buffer is full.
    ResourceExhausted,
    /// A server cannot be reached; retrying elsewhere or later may work.
    Unavailable,
    /// Bytes that no replica or under-store copy holds any more.
    DataLost,
    /// The operation does not fit the object's state (e.g. reading an incomplete file).
    FailedPrecondition,
    IsADirectory,
    NotADirectory,
    DirectoryNotEmpty,
    Timeout,
    Internal,
}

impl ErrorKind {
    /// Whether the same call may succeed if tried again (elsewhere or later).
    pub fn is_retryable(self) -> bool {
        matches!(self, ErrorKind::Unavailable | ErrorKind::Timeout)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not-found",
            ErrorKind::AlreadyExists => "already-exists",
            ErrorKind::InvalidArgument => "invalid-argument",
            ErrorKind::PermissionDenied => "permission-denied",
            ErrorKind::ResourceExhausted => "resource-exhausted",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::DataLost => "data-lost",
            ErrorKind::FailedPrecondition => "failed-precondition",
            ErrorKind::IsADirectory => "is-a-directory",
            ErrorKind::NotADirectory => "not-a-directory",
            ErrorKind::DirectoryNotEmpty => "directory-not-empty",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Internal => "internal",
        }
    }

    const ALL: [ErrorKind; 13] = [
        ErrorKind::NotFound,
        ErrorKind::AlreadyExists,
        ErrorKind::InvalidArgument,
        ErrorKind::PermissionDenied,
        ErrorKind::ResourceExhausted,
        ErrorKind::Unavailable,
        ErrorKind::DataLost,
        ErrorKind::FailedPrecondition,
        ErrorKind::IsADirectory,
        ErrorKind::NotADirectory,
        ErrorKind::DirectoryNotEmpty,
        ErrorKind::Timeout,
        ErrorKind::Internal,
    ];

    pub fn parse(s: &str) -> Option<ErrorKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    pub fn code(self) -> ErrorCode {
        match self {
            ErrorKind::NotFound => ErrorCode::NotFound,
            ErrorKind::AlreadyExists => ErrorCode::AlreadyExists,
            ErrorKind::InvalidArgument => ErrorCode::InvalidArgument,
            ErrorKind::PermissionDenied => ErrorCode::PermissionDenied,
            ErrorKind::ResourceExhausted => ErrorCode::ResourceExhausted,
            ErrorKind::Unavailable => ErrorCode::Unavailable,
            ErrorKind::DataLost => ErrorCode::DataLost,
            ErrorKind::FailedPrecondition => ErrorCode::FailedPrecondition,
            ErrorKind::IsADirectory => ErrorCode::IsADirectory,
            ErrorKind::NotADirectory => ErrorCode::NotADirectory,
            ErrorKind::DirectoryNotEmpty => ErrorCode::DirectoryNotEmpty,
            ErrorKind::Timeout => ErrorCode::Timeout,
            ErrorKind::Internal => ErrorCode::Internal,
        }
    }

    pub fn from_code(code: ErrorCode) -> Option<ErrorKind> {
        Self::ALL.into_iter().find(|k| k.code() == code)
    }

    fn grpc_code(self) -> tonic::Code {
        match self {
            ErrorKind::NotFound => tonic::Code::NotFound,
            ErrorKind::AlreadyExists => tonic::Code::AlreadyExists,
            ErrorKind::InvalidArgument => tonic::Code::InvalidArgument,
            ErrorKind::PermissionDenied => tonic::Code::PermissionDenied,
            ErrorKind::ResourceExhausted => tonic::Code::ResourceExhausted,
            ErrorKind::Unavailable => tonic::Code::Unavailable,
            ErrorKind::DataLost => tonic::Code::DataLoss,
            ErrorKind::FailedPrecondition
            | ErrorKind::IsADirectory
            | ErrorKind::NotADirectory
            | ErrorKind::DirectoryNotEmpty => tonic::Code::FailedPrecondition,
            ErrorKind::Timeout => tonic::Code::DeadlineExceeded,
            ErrorKind::Internal => tonic::Code::Internal,
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ThawError {
    pub kind: ErrorKind,
    pub message: String,
}

pub type Result<T, E = ThawError> = std::result::Result<T, E>;

macro_rules! ctor {
    ($($name:ident => $kind:ident),* $(,)?) => {
        $(pub fn $name(message: impl Into<String>) -> Self {
            Self::new(ErrorKind::$kind, message)
        })*
    };
}

impl ThawError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ThawError { kind, message: message.into() }
    }

    ctor! {
        not_found => NotFound,
        already_exists => AlreadyExists,
        invalid => InvalidArgument,
        permission_denied => PermissionDenied,
        exhausted => ResourceExhausted,
        unavailable => Unavailable,
        data_lost => DataLost,
        precondition => FailedPrecondition,
        is_dir => IsADirectory,
        not_dir => NotADirectory,
        not_empty => DirectoryNotEmpty,
        timeout => Timeout,
        internal => Internal,
    }

    /// Adds context in front of the message, keeping the kind.
    pub fn context(mut self, what: impl std::fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }
}

/// gRPC metadata key naming the error kind of a status a Thaw server sent.
pub const KIND_HEADER: &str = "thaw-error-kind";

/// The only place a ThawError becomes a gRPC status.
impl From<ThawError> for tonic::Status {
    fn from(e: ThawError) -> Self {
        let mut status = tonic::Status::new(e.kind.grpc_code(), e.message);
        if let Ok(v) = e.kind.as_str().parse() {
            status.metadata_mut().insert(KIND_HEADER, v);
        }
        status
    }
}

/// The only place a gRPC status becomes a ThawError: the kind travels in metadata;
/// transport failures (no kind) are `Unavailable`.
impl From<tonic::Status> for ThawError {
    fn from(s: tonic::Status) -> Self {
        let kind = s.metadata().get(KIND_HEADER).and_then(|v| v.to_str().ok()).and_then(ErrorKind::parse).unwrap_or(
            match s.code() {
                tonic::Code::NotFound => ErrorKind::NotFound,
                tonic::Code::AlreadyExists => ErrorKind::AlreadyExists,
                tonic::Code::InvalidArgument | tonic::Code::OutOfRange => ErrorKind::InvalidArgument,
                tonic::Code::PermissionDenied | tonic::Code::Unauthenticated => ErrorKind::PermissionDenied,
                tonic::Code::ResourceExhausted => ErrorKind::ResourceExhausted,
                tonic::Code::DataLoss => ErrorKind::DataLost,
                tonic::Code::FailedPrecondition => ErrorKind::FailedPrecondition,
                tonic::Code::DeadlineExceeded => ErrorKind::Timeout,
                tonic::Code::Unavailable | tonic::Code::Cancelled | tonic::Code::Unknown => ErrorKind::Unavailable,
                _ => ErrorKind::Internal,
            },
        );
        ThawError::new(kind, s.message().to_string())
    }
}

impl From<std::io::Error> for ThawError {
    fn from(e: std::io::Error) -> Self {
        use std::io::ErrorKind as Io;
        let kind = match e.kind() {
            Io::NotFound => ErrorKind::NotFound,
            Io::AlreadyExists => ErrorKind::AlreadyExists,
            Io::PermissionDenied => ErrorKind::PermissionDenied,
            Io::InvalidInput | Io::InvalidData => ErrorKind::InvalidArgument,
            Io::StorageFull | Io::QuotaExceeded => ErrorKind::ResourceExhausted,
            Io::TimedOut => ErrorKind::Timeout,
            Io::ConnectionRefused
            | Io::ConnectionReset
            | Io::ConnectionAborted
            | Io::NotConnected
            | Io::BrokenPipe
            | Io::UnexpectedEof => ErrorKind::Unavailable,
            _ => ErrorKind::Internal,
        };
        ThawError::new(kind, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_survive_grpc_and_data_plane() {
        for kind in ErrorKind::ALL {
            let status: tonic::Status = ThawError::new(kind, "boom").into();
            let back: ThawError = status.into();
            assert_eq!(back.kind, kind);
            assert_eq!(back.message, "boom");
            assert_eq!(ErrorKind::from_code(kind.code()), Some(kind));
        }
    }
}
