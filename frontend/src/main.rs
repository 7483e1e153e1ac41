//! Cairn web console: a Leptos client-side app, built by Trunk into `frontend/dist` and served
//! by the cairn server at `/` (unknown paths answer `index.html`, so client routes survive a
//! reload).

mod api;
mod components;
mod pages;
mod session;

use leptos::prelude::*;
use leptos_router::components::{Route, Router, Routes};
use leptos_router::path;

use crate::pages::{HomePage, LoginPage, NotFoundPage};
use crate::session::Session;

fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(App);
}

#[component]
fn App() -> impl IntoView {
    let session = Session::load();
    view! {
        <Router>
            <Routes fallback=NotFoundPage>
                <Route path=path!("/") view=move || view! { <HomePage session /> } />
                <Route path=path!("/login") view=move || view! { <LoginPage session /> } />
            </Routes>
        </Router>
    }
}
