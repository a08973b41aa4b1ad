//! Errors of the HTTP API and the one table that maps them to a status and Iggy's error body
//! (PROTOCOL.md §8.5): `{"id": code, "code": "snake_case_name", "reason": "...", "field": ...}`.

use http::StatusCode;
use proto::status::ErrorCode;

use crate::wire::Response;

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// The core refused it with this wire code.
    #[error("{}", code_name(*.0))]
    Code(u32),
    /// No usable credential: missing, malformed, forged, expired or revoked.
    #[error("{0}")]
    Unauthenticated(&'static str),
    /// The request itself is unusable (bad JSON, a bad identifier or query); `field` names
    /// the part at fault.
    #[error("{reason}")]
    Invalid {
        reason: String,
        field: Option<&'static str>,
    },
    #[error("no such route")]
    NoRoute,
    #[error("method not allowed")]
    MethodNotAllowed,
    /// A read found nothing (the binary protocol's empty reply).
    #[error("not found")]
    NotFound,
    /// A route this server cannot answer (no metrics from its handler).
    #[error("{0} is not available in this build")]
    Unavailable(&'static str),
    /// The core answered something this edge cannot read: a bug, logged.
    #[error("internal error: {0}")]
    Internal(String),
}

/// The snake-case name of a wire code, as the reason of its error body.
fn code_name(code: u32) -> &'static str {
    ErrorCode::from_u32(code).map_or("error", ErrorCode::name)
}

impl ApiError {
    pub fn invalid(reason: impl Into<String>, field: &'static str) -> Self {
        Self::Invalid {
            reason: reason.into(),
            field: Some(field),
        }
    }

    /// The Iggy error code the body carries.
    fn code(&self) -> u32 {
        let code = match self {
            Self::Code(code) => return *code,
            Self::Unauthenticated(_) => ErrorCode::Unauthenticated,
            Self::Invalid { .. } => ErrorCode::InvalidFormat,
            Self::NoRoute | Self::NotFound => ErrorCode::ResourceNotFound,
            Self::MethodNotAllowed => ErrorCode::InvalidCommand,
            Self::Unavailable(_) => ErrorCode::FeatureUnavailable,
            Self::Internal(_) => ErrorCode::Error,
        };
        code.as_u32()
    }

    /// The HTTP status, as the reference server chooses it (§8.5): 401 for credentials, 403
    /// for permissions, 404 for what does not exist, 503 for transient refusals, else 400.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Unauthenticated(_) => return StatusCode::UNAUTHORIZED,
            Self::NoRoute | Self::NotFound => return StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => return StatusCode::METHOD_NOT_ALLOWED,
            Self::Unavailable(_) => return StatusCode::NOT_IMPLEMENTED,
            Self::Internal(_) => return StatusCode::INTERNAL_SERVER_ERROR,
            Self::Code(_) | Self::Invalid { .. } => {}
        }
        let Some(code) = ErrorCode::from_u32(self.code()) else {
            return StatusCode::BAD_REQUEST;
        };
        match code {
            ErrorCode::Unauthenticated
            | ErrorCode::AccessTokenMissing
            | ErrorCode::InvalidAccessToken
            | ErrorCode::InvalidPersonalAccessToken => StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthorized => StatusCode::FORBIDDEN,
            ErrorCode::TransientNotCommitted | ErrorCode::TransientNotAccepted => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ErrorCode::ResourceNotFound => StatusCode::NOT_FOUND,
            code if code.name().ends_with("_not_found") => StatusCode::NOT_FOUND,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    /// The error response: status and JSON body (and `Retry-After` for a transient one).
    pub fn response(&self) -> Response {
        let code = self.code();
        let name = ErrorCode::from_u32(code).map_or("error", ErrorCode::name);
        let field = match self {
            Self::Invalid { field, .. } => *field,
            _ => None,
        };
        let body = serde_json::json!({
            "id": code,
            "code": name,
            "reason": self.to_string(),
            "field": field,
        });
        let status = self.status();
        let response = Response::with_body(status, "application/json", body.to_string().into());
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response.header("retry-after", "1".to_owned())
        } else {
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use http::StatusCode;
    use proto::status::ErrorCode;

    use super::ApiError;

    fn status(code: ErrorCode) -> StatusCode {
        ApiError::Code(code.as_u32()).status()
    }

    #[test]
    fn statuses_follow_the_reference_table() {
        assert_eq!(
            status(ErrorCode::InvalidCredentials),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(status(ErrorCode::Unauthenticated), StatusCode::UNAUTHORIZED);
        assert_eq!(
            status(ErrorCode::InvalidPersonalAccessToken),
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(status(ErrorCode::Unauthorized), StatusCode::FORBIDDEN);
        for missing in [
            ErrorCode::StreamIdNotFound,
            ErrorCode::TopicIdNotFound,
            ErrorCode::PartitionNotFound,
            ErrorCode::SegmentNotFound,
            ErrorCode::ClientNotFound,
            ErrorCode::ConsumerGroupIdNotFound,
            ErrorCode::ConsumerGroupNameNotFound,
            ErrorCode::ConsumerGroupMemberNotFound,
            ErrorCode::ConsumerOffsetNotFound,
            ErrorCode::ResourceNotFound,
        ] {
            assert_eq!(status(missing), StatusCode::NOT_FOUND, "{missing:?}");
        }
        assert_eq!(
            status(ErrorCode::TransientNotAccepted),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(status(ErrorCode::InvalidCommand), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn the_body_names_the_code() {
        let response = ApiError::Code(ErrorCode::InvalidCredentials.as_u32()).response();
        let body: serde_json::Value = serde_json::from_slice(&response.body).expect("json");
        assert_eq!(body["id"], 42);
        assert_eq!(body["code"], "invalid_credentials");
        let transient = ApiError::Code(ErrorCode::TransientNotAccepted.as_u32()).response();
        assert!(
            transient
                .headers
                .iter()
                .any(|(name, _)| *name == "retry-after")
        );
    }
}
