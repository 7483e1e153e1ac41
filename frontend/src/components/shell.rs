use leptos::prelude::*;
use leptos_router::components::Redirect;

use crate::api::ApiError;
use crate::components::TopBar;
use crate::session::Session;

/// Every signed-in page: the top bar above the page's content; without a token, the login
/// form instead.
#[component]
pub fn Shell(session: Session, children: ChildrenFn) -> impl IntoView {
    view! {
        <Show when=move || session.is_signed_in() fallback=|| view! { <Redirect path="/login" /> }>
            <TopBar session />
            <main class="page">{children()}</main>
        </Show>
    }
}

/// A failed call, as a readable message.
pub fn error_view(error: &ApiError) -> AnyView {
    view! { <p class="error" role="alert">{error.to_string()}</p> }.into_any()
}

pub fn loading_view() -> AnyView {
    view! { <p class="muted loading">"Loading…"</p> }.into_any()
}

/// `n noun` / `n nouns`.
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Percent-encodes a query-string value (RFC 3986 unreserved characters stay).
pub fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_query_values() {
        assert_eq!(url_encode("a b&c=é"), "a%20b%26c%3D%C3%A9");
        assert_eq!(count(1, "chunk"), "1 chunk");
        assert_eq!(count(2, "chunk"), "2 chunks");
    }
}
