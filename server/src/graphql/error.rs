//! The one place where errors become client codes (DESIGN.md §9).
//!
//! | code | when |
//! |---|---|
//! | `UNAUTHENTICATED` | no token, or an invalid or revoked one |
//! | `FORBIDDEN` | the caller's role lacks the capability |
//! | `NOT_FOUND` | missing, or another team's (indistinguishable) |
//! | `BAD_USER_INPUT` | a rule refused an argument; malformed or invalid queries |
//! | `CONFLICT` | a uniqueness rule (e.g. a corpus name already used in the team) |
//! | `QUERY_TOO_DEEP` / `QUERY_TOO_COMPLEX` | the query exceeds the depth or complexity limit, or has more than `MAX_ROOT_FIELDS` root fields (refused before any work) |
//! | `PAYLOAD_TOO_LARGE` | a body over the configured cap (set by the HTTP layer) |
//! | `QUOTA_EXCEEDED` | a per-team quota is spent (knowledge extraction: `CAIRN_KG_DAILY_DOCS` documents per 24 hours) |
//! | `RATE_LIMITED` | the caller's per-user search rate (`CAIRN_SEARCH_RATE`, `CAIRN_SEARCH_BURST`) is spent for now |
//! | `UNAVAILABLE` | a needed part is not configured or loaded (e.g. the embedding model) |
//! | `LLM_TIMEOUT` / `LLM_UNAVAILABLE` / `LLM_ERROR` / `LLM_BAD_REPLY` / `LLM_CONFIG` | the language model timed out, could not be reached, answered with an error status, answered something unusable, or is misconfigured |
//! | `INTERNAL` | anything else; details go to the log, never to the client |

use std::sync::Arc;

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextParseQuery, NextValidation,
};
use async_graphql::parser::types::ExecutableDocument;
use async_graphql::{ErrorExtensions, ServerError, ServerResult, ValidationResult, Variables};

use crate::service::{AuthError, ServiceError};

pub const UNAUTHENTICATED: &str = "UNAUTHENTICATED";
pub const FORBIDDEN: &str = "FORBIDDEN";
pub const NOT_FOUND: &str = "NOT_FOUND";
pub const BAD_USER_INPUT: &str = "BAD_USER_INPUT";
pub const CONFLICT: &str = "CONFLICT";
pub const QUERY_TOO_DEEP: &str = "QUERY_TOO_DEEP";
pub const QUERY_TOO_COMPLEX: &str = "QUERY_TOO_COMPLEX";
pub const PAYLOAD_TOO_LARGE: &str = "PAYLOAD_TOO_LARGE";
pub const UNAVAILABLE: &str = "UNAVAILABLE";
pub const QUOTA_EXCEEDED: &str = "QUOTA_EXCEEDED";
pub const RATE_LIMITED: &str = "RATE_LIMITED";
pub const INTERNAL: &str = "INTERNAL";

/// A GraphQL error with `extensions.code`.
pub fn coded(code: &'static str, message: impl Into<String>) -> async_graphql::Error {
    async_graphql::Error::new(message).extend_with(|_, e| e.set("code", code))
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        ApiError(e)
    }
}

/// Wrapper so `?` in resolvers converts service errors into coded GraphQL errors.
pub struct ApiError(pub ServiceError);

impl From<ApiError> for async_graphql::Error {
    fn from(ApiError(e): ApiError) -> Self {
        client_error(&e)
    }
}

/// A service error as a resolver returns it (`.map_err(api)`).
pub(crate) fn api(e: ServiceError) -> async_graphql::Error {
    client_error(&e)
}

/// A dataloader's error (one `Arc` shared by every key of the batch), keeping its kind:
/// a loader that failed with NOT_FOUND or FORBIDDEN answers that, not INTERNAL.
pub(crate) fn loaded(e: std::sync::Arc<ServiceError>) -> async_graphql::Error {
    client_error(&e)
}

/// The code table: every service error becomes its client code here and nowhere else.
fn client_error(e: &ServiceError) -> async_graphql::Error {
    match e {
        ServiceError::Auth(AuthError::MissingToken | AuthError::InvalidToken) => {
            coded(UNAUTHENTICATED, e.to_string())
        }
        ServiceError::Auth(AuthError::Forbidden(_) | AuthError::SystemCorpus) => {
            coded(FORBIDDEN, e.to_string())
        }
        ServiceError::NotFound(_) => coded(NOT_FOUND, e.to_string()),
        ServiceError::Invalid(_) => coded(BAD_USER_INPUT, e.to_string()),
        ServiceError::Conflict(_) => coded(CONFLICT, e.to_string()),
        ServiceError::TooLarge(_) => coded(PAYLOAD_TOO_LARGE, e.to_string()),
        ServiceError::Unavailable(_) => coded(UNAVAILABLE, e.to_string()),
        ServiceError::QuotaExceeded(_) => coded(QUOTA_EXCEEDED, e.to_string()),
        ServiceError::RateLimited(_) => coded(RATE_LIMITED, e.to_string()),
        ServiceError::Upstream { code, .. } => coded(code, e.to_string()),
        ServiceError::Internal(detail) => {
            tracing::error!(error = %detail, "internal error");
            coded(INTERNAL, "internal error")
        }
    }
}

/// Gives parse and validation errors (which async-graphql raises without a code) their code,
/// on HTTP and WebSocket alike.
pub struct ErrorCodes;

impl ExtensionFactory for ErrorCodes {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(ErrorCodesExtension)
    }
}

struct ErrorCodesExtension;

fn with_code(mut err: ServerError, code: &'static str) -> ServerError {
    let has_code = err
        .extensions
        .as_ref()
        .is_some_and(|x| x.get("code").is_some());
    if !has_code {
        err.extensions
            .get_or_insert_with(Default::default)
            .set("code", code);
    }
    err
}

#[async_graphql::async_trait::async_trait]
impl Extension for ErrorCodesExtension {
    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        next.run(ctx, query, variables)
            .await
            .map_err(|e| with_code(e, BAD_USER_INPUT))
    }

    async fn validation(
        &self,
        ctx: &ExtensionContext<'_>,
        next: NextValidation<'_>,
    ) -> Result<ValidationResult, Vec<ServerError>> {
        next.run(ctx).await.map_err(|errors| {
            errors
                .into_iter()
                .map(|e| {
                    let code = if e.message.contains("nested too deep") {
                        QUERY_TOO_DEEP
                    } else if e.message.contains("too complex") {
                        QUERY_TOO_COMPLEX
                    } else {
                        BAD_USER_INPUT
                    };
                    with_code(e, code)
                })
                .collect()
        })
    }
}
