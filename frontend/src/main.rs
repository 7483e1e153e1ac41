//! Cairn web console: a Leptos client-side app, built by `scripts/build-console.sh` into
//! `frontend/dist` and served by the cairn server at `/` (unknown paths answer `index.html`,
//! so client routes survive a reload).
//!
//! Layout: [`api`] is the GraphQL transport (POST and multipart upload) and its readable
//! errors; [`ws`] the one shared subscription socket; [`session`] the token; `components` the
//! shared pieces (the frame, the live job bar); `pages` one module per route.

mod api;
mod components;
mod pages;
mod session;
mod ws;

use leptos::prelude::*;
use leptos_router::components::{Route, Router, Routes};
use leptos_router::path;

use crate::pages::{
    CorpusPage, DocumentPage, EntityPage, HomePage, KnowledgePage, LoginPage, NotFoundPage,
    SearchPage,
};
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
                <Route path=path!("/corpora/:id") view=move || view! { <CorpusPage session /> } />
                <Route path=path!("/documents/:id") view=move || view! { <DocumentPage session /> } />
                <Route path=path!("/search") view=move || view! { <SearchPage session /> } />
                <Route path=path!("/knowledge") view=move || view! { <KnowledgePage session /> } />
                <Route path=path!("/entities/:id") view=move || view! { <EntityPage session /> } />
            </Routes>
        </Router>
    }
}
