use leptos::prelude::*;

use crate::api::Principal;
use crate::session::Session;

/// The bar above every signed-in page: who you are, and the way out.
#[component]
pub fn TopBar(session: Session, me: Principal) -> impl IntoView {
    let role = me.user.role.to_lowercase();
    let capabilities = format!("Capabilities: {}", me.capabilities.join(", "));
    view! {
        <header class="top-bar">
            <a class="brand" href="/">"Cairn"</a>
            <div class="who">
                <span id="whoami" title=capabilities>
                    <strong class="user">{me.user.name}</strong>
                    <span class="role">{role}</span>
                    <span class="team">"team " {me.team.name}</span>
                </span>
                <LogoutButton session />
            </div>
        </header>
    }
}

/// Forgets the token; the page then falls back to the login form.
#[component]
pub fn LogoutButton(session: Session) -> impl IntoView {
    view! {
        <button id="logout-button" type="button" class="secondary" on:click=move |_| session.sign_out()>
            "Log out"
        </button>
    }
}
