use leptos::html::Input;
use leptos::prelude::*;
use leptos_router::components::Redirect;

use crate::api;
use crate::session::Session;

/// Sign-in with an API token. The token is checked against the API before it is kept.
#[component]
pub fn LoginPage(session: Session) -> impl IntoView {
    let input = NodeRef::<Input>::new();
    // Accepted tokens go to the session; the page then redirects home.
    let check = Action::new_local(|token: &String| {
        let token = token.clone();
        async move { api::check_token(&token).await.map(|_| token) }
    });
    Effect::new(move || {
        if let Some(Ok(token)) = check.value().get() {
            session.sign_in(token);
        }
    });
    let error = move || match check.value().get() {
        Some(Err(e)) => {
            Some(view! { <p id="login-error" class="error" role="alert">{e.to_string()}</p> })
        }
        _ => None,
    };
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        // Read the field itself: it may have been filled without input events.
        let token = input
            .get_untracked()
            .map(|i| i.value().trim().to_owned())
            .unwrap_or_default();
        if !token.is_empty() {
            check.dispatch(token);
        }
    };
    let form = move || {
        view! {
            <main class="login">
                <form id="login-form" class="card" on:submit=on_submit>
                    <h1 class="brand">"Cairn"</h1>
                    <p class="muted">"Sign in with an API token."</p>
                    <label for="token-input">"API token"</label>
                    <input
                        id="token-input"
                        node_ref=input
                        type="password"
                        name="token"
                        autocomplete="current-password"
                        spellcheck="false"
                        required
                        autofocus
                    />
                    <button id="login-button" type="submit" disabled=move || check.pending().get()>
                        {move || if check.pending().get() { "Signing in…" } else { "Sign in" }}
                    </button>
                    {error}
                </form>
            </main>
        }
    };
    view! {
        <Show when=move || session.is_signed_in() fallback=form>
            <Redirect path="/" />
        </Show>
    }
}
