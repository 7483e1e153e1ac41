//! The signed-in state: the API token, kept in `localStorage` under [`TOKEN_KEY`] so a reload
//! (or a new tab) stays signed in.

use leptos::prelude::*;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::{self, ApiError};

/// The `localStorage` key holding the API token.
pub const TOKEN_KEY: &str = "cairn.token";

/// The console's session: `Copy`, passed to the pages that need it.
#[derive(Clone, Copy)]
pub struct Session {
    token: RwSignal<Option<String>>,
}

impl Session {
    /// Reads the token stored by an earlier visit, if any.
    pub fn load() -> Self {
        let stored = storage()
            .and_then(|s| s.get_item(TOKEN_KEY).ok().flatten())
            .filter(|t| !t.is_empty());
        Self {
            token: RwSignal::new(stored),
        }
    }

    /// The current token (tracked: a reactive reader re-runs when it changes).
    pub fn token(&self) -> Option<String> {
        self.token.get()
    }

    pub fn is_signed_in(&self) -> bool {
        self.token.with(Option::is_some)
    }

    /// Remembers a token the API has accepted.
    pub fn sign_in(&self, token: String) {
        if let Some(s) = storage() {
            // A private window may refuse storage: the session then lasts until a reload.
            let _ = s.set_item(TOKEN_KEY, &token);
        }
        self.token.set(Some(token));
    }

    /// The current token without tracking (for event handlers and async work).
    pub fn token_untracked(&self) -> Option<String> {
        self.token.get_untracked()
    }

    /// Runs one GraphQL operation as the signed-in user. A token the server no longer
    /// accepts signs the console out (every page then falls back to the login form).
    pub async fn gql<T: DeserializeOwned>(
        self,
        query: &str,
        variables: Value,
    ) -> Result<T, ApiError> {
        let token = self
            .token_untracked()
            .ok_or_else(|| ApiError::local("Signed out"))?;
        let answer = api::graphql(&token, query, variables).await;
        self.forget_if_refused(&answer);
        answer
    }

    /// Uploads `file` through `uploadDocument`-style multipart `query` (see [`api::upload`]).
    pub async fn upload<T: DeserializeOwned>(
        self,
        query: &str,
        variables: Value,
        file_variable: &str,
        file: &web_sys::File,
    ) -> Result<T, ApiError> {
        let token = self
            .token_untracked()
            .ok_or_else(|| ApiError::local("Signed out"))?;
        let answer = api::upload(&token, query, variables, file_variable, file).await;
        self.forget_if_refused(&answer);
        answer
    }

    fn forget_if_refused<T>(&self, answer: &Result<T, ApiError>) {
        if matches!(answer, Err(e) if e.is_unauthenticated()) {
            self.sign_out();
        }
    }

    pub fn sign_out(&self) {
        if let Some(s) = storage() {
            let _ = s.remove_item(TOKEN_KEY);
        }
        self.token.set(None);
    }
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok().flatten()
}
