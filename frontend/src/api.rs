//! The GraphQL client: one POST helper for `/graphql` (same origin) and the typed queries the
//! pages use. Errors come back as [`ApiError`], whose `Display` is a message fit for a person.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{Headers, Request, RequestInit, Response};

const ENDPOINT: &str = "/graphql";

/// A failed call: the GraphQL `extensions.code` when the server gave one, and the readable
/// message to show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub code: Option<String>,
    pub message: String,
}

impl ApiError {
    /// Maps a GraphQL error (its `extensions.code` and the server's message) to what the
    /// console shows. Codes whose server message is generic get a fixed sentence; for input
    /// and lookup errors the server's own message is the useful part.
    pub fn from_graphql(code: Option<&str>, server_message: &str) -> Self {
        let server_message = server_message.trim();
        let or = |fallback: &str| {
            if server_message.is_empty() {
                fallback.to_owned()
            } else {
                server_message.to_owned()
            }
        };
        let message = match code {
            Some("UNAUTHENTICATED") => "Invalid or revoked token".to_owned(),
            Some("FORBIDDEN") => "You do not have permission to do that".to_owned(),
            Some("NOT_FOUND") => or("Not found"),
            Some("BAD_USER_INPUT") => or("The request was not valid"),
            Some("PAYLOAD_TOO_LARGE") => "The upload is too large".to_owned(),
            Some("INTERNAL") => "The server failed to answer; try again later".to_owned(),
            Some("UNAVAILABLE") => or("That is not available on this server"),
            Some(code) if code.starts_with("LLM_") => or("The language model failed to answer"),
            _ => or("The server reported an error"),
        };
        Self {
            code: code.map(str::to_owned),
            message,
        }
    }

    /// A response that is not GraphQL JSON: only its HTTP status says what happened.
    fn from_status(status: u16) -> Self {
        match status {
            401 => Self::from_graphql(Some("UNAUTHENTICATED"), ""),
            403 => Self::from_graphql(Some("FORBIDDEN"), ""),
            413 => Self::from_graphql(Some("PAYLOAD_TOO_LARGE"), ""),
            _ => Self::local(format!("The server answered HTTP {status}")),
        }
    }

    pub fn local(message: impl Into<String>) -> Self {
        Self {
            code: None,
            message: message.into(),
        }
    }

    pub fn is_unauthenticated(&self) -> bool {
        self.code.as_deref() == Some("UNAUTHENTICATED")
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

#[derive(Deserialize)]
struct GraphQlResponse {
    data: Option<Value>,
    #[serde(default)]
    errors: Vec<GraphQlError>,
}

#[derive(Deserialize)]
struct GraphQlError {
    #[serde(default)]
    message: String,
    #[serde(default)]
    extensions: Option<GraphQlExtensions>,
}

#[derive(Deserialize)]
struct GraphQlExtensions {
    code: Option<String>,
}

/// Decodes a `/graphql` answer. The body is parsed whatever the HTTP status (a bad token
/// answers 401 with a GraphQL error body); the first error wins over any partial data.
fn decode<T: DeserializeOwned>(status: u16, body: &str) -> Result<T, ApiError> {
    let Ok(response) = serde_json::from_str::<GraphQlResponse>(body) else {
        return Err(ApiError::from_status(status));
    };
    if let Some(error) = response.errors.first() {
        let code = error.extensions.as_ref().and_then(|e| e.code.as_deref());
        return Err(ApiError::from_graphql(code, &error.message));
    }
    let data = response.data.ok_or_else(|| ApiError::from_status(status))?;
    serde_json::from_value(data)
        .map_err(|e| ApiError::local(format!("Unexpected answer from the server: {e}")))
}

/// POSTs one GraphQL operation with the bearer token and decodes its `data` into `T`.
pub async fn graphql<T: DeserializeOwned>(
    token: &str,
    query: &str,
    variables: Value,
) -> Result<T, ApiError> {
    let body = json!({ "query": query, "variables": variables }).to_string();
    let (status, text) = post(token, &JsValue::from_str(&body), true)
        .await
        .map_err(|_| ApiError::local("Cannot reach the server"))?;
    decode(status, &text)
}

/// Uploads one file as a GraphQL multipart request (operations, map, file part), the way
/// `uploadDocument` expects it; the browser streams the file and sets the boundary.
pub async fn upload<T: DeserializeOwned>(
    token: &str,
    query: &str,
    mut variables: Value,
    file_variable: &str,
    file: &web_sys::File,
) -> Result<T, ApiError> {
    if let Some(vars) = variables.as_object_mut() {
        vars.insert(file_variable.to_owned(), Value::Null);
    }
    let operations = json!({ "query": query, "variables": variables }).to_string();
    let map = json!({ "0": [format!("variables.{file_variable}")] }).to_string();
    let form = (|| -> Result<web_sys::FormData, JsValue> {
        let form = web_sys::FormData::new()?;
        form.append_with_str("operations", &operations)?;
        form.append_with_str("map", &map)?;
        form.append_with_blob_and_filename("0", file, &file.name())?;
        Ok(form)
    })()
    .map_err(|_| ApiError::local("The browser could not prepare the upload"))?;
    let (status, text) = post(token, &form.into(), false)
        .await
        .map_err(|_| ApiError::local("Cannot reach the server"))?;
    decode(status, &text)
}

async fn post(token: &str, body: &JsValue, json_body: bool) -> Result<(u16, String), JsValue> {
    let headers = Headers::new()?;
    if json_body {
        headers.set("Content-Type", "application/json")?;
    }
    headers.set("Accept", "application/json")?;
    headers.set("Authorization", &format!("Bearer {token}"))?;
    let init = RequestInit::new();
    init.set_method("POST");
    init.set_headers(&headers);
    init.set_body(body);
    let request = Request::new_with_str_and_init(ENDPOINT, &init)?;
    let window = web_sys::window().ok_or_else(|| JsValue::from_str("no window"))?;
    let response: Response = JsFuture::from(window.fetch_with_request(&request))
        .await?
        .dyn_into()?;
    let text = JsFuture::from(response.text()?).await?;
    Ok((response.status(), text.as_string().unwrap_or_default()))
}

// ----- the operations the console uses -----

#[derive(Clone, Debug, Deserialize)]
pub struct Principal {
    pub user: User,
    pub team: Team,
    #[serde(default)]
    pub capabilities: Vec<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct User {
    pub name: String,
    pub role: String,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Team {
    pub name: String,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Connection<T> {
    pub edges: Vec<Edge<T>>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Edge<T> {
    pub node: T,
}

/// A connection read with its `pageInfo { hasNextPage endCursor }`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    pub page_info: PageInfo,
    pub edges: Vec<Edge<T>>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageInfo {
    pub has_next_page: bool,
    pub end_cursor: Option<String>,
}

impl<T> Page<T> {
    /// The cursor of the next page, when there is one.
    pub fn next_cursor(&self) -> Option<String> {
        self.page_info
            .end_cursor
            .clone()
            .filter(|_| self.page_info.has_next_page)
    }

    pub fn into_nodes(self) -> Vec<T> {
        self.edges.into_iter().map(|e| e.node).collect()
    }
}

/// A corpus by name, for pickers (`corpora { edges { node { id name system } } }`).
#[derive(Clone, Debug, Deserialize)]
pub struct CorpusRef {
    pub id: String,
    pub name: String,
    pub system: bool,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Corpus {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    #[serde(default)]
    pub system: bool,
    pub document_count: u64,
    pub chunk_count: u64,
}

/// Checks that the API accepts `token` (the login form keeps only tokens that work).
pub async fn check_token(token: &str) -> Result<(), ApiError> {
    graphql::<Value>(token, "{ me { user { id } } }", Value::Null)
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unauthenticated_body_with_401_is_read() {
        let body =
            r#"{"errors":[{"message":"invalid token","extensions":{"code":"UNAUTHENTICATED"}}]}"#;
        let err = decode::<Value>(401, body).unwrap_err();
        assert_eq!(err.to_string(), "Invalid or revoked token");
        assert!(err.is_unauthenticated());
    }

    #[test]
    fn bad_input_keeps_the_server_message() {
        let body = r#"{"data":null,"errors":[{"message":"name must not be empty","extensions":{"code":"BAD_USER_INPUT"}}]}"#;
        let err = decode::<Value>(200, body).unwrap_err();
        assert_eq!(err.to_string(), "name must not be empty");
        assert_eq!(err.code.as_deref(), Some("BAD_USER_INPUT"));
    }

    #[test]
    fn internal_hides_the_server_message() {
        let body = r#"{"errors":[{"message":"db exploded","extensions":{"code":"INTERNAL"}}]}"#;
        let err = decode::<Value>(200, body).unwrap_err();
        assert!(!err.to_string().contains("db"));
    }

    #[test]
    fn non_json_answers_fall_back_to_the_status() {
        assert_eq!(
            decode::<Value>(401, "Unauthorized")
                .unwrap_err()
                .to_string(),
            "Invalid or revoked token"
        );
        assert_eq!(
            decode::<Value>(502, "<html>").unwrap_err().to_string(),
            "The server answered HTTP 502"
        );
    }

    #[test]
    fn principal_and_corpora_decode() {
        #[derive(Deserialize)]
        struct Both {
            me: Principal,
            corpora: Connection<Corpus>,
        }
        let body = r#"{"data":{"me":{"user":{"id":"u1","name":"admin","role":"OWNER"},
            "team":{"id":"t1","name":"default"},"capabilities":["admin","search"]},
            "corpora":{"edges":[{"node":{"id":"c1","name":"Docs","description":null,
            "documentCount":3,"chunkCount":42}}]}}}"#;
        let o: Both = decode(200, body).unwrap();
        assert_eq!(o.me.user.name, "admin");
        assert_eq!(o.me.team.name, "default");
        assert!(!o.corpora.edges[0].node.system);
        assert_eq!(o.corpora.edges[0].node.chunk_count, 42);
    }
}
