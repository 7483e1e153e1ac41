//! The signed-in state: the API token, kept in `localStorage` under [`TOKEN_KEY`] so a reload
//! (or a new tab) stays signed in.

use leptos::prelude::*;

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
