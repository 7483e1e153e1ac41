//! Forward cursor paging over a GraphQL connection, with "Previous" through a stack of the
//! cursors already visited.

use leptos::prelude::*;

/// The cursor of the page shown and of the pages before it. `Copy`: two signals.
#[derive(Clone, Copy)]
pub struct Cursors {
    before: RwSignal<Vec<Option<String>>>,
    current: RwSignal<Option<String>>,
}

impl Cursors {
    pub fn new() -> Self {
        Self {
            before: RwSignal::new(Vec::new()),
            current: RwSignal::new(None),
        }
    }

    /// The `after` argument for the page to show (tracked).
    pub fn after(&self) -> Option<String> {
        self.current.get()
    }

    /// Back to the first page whenever `key` (a search, a filter, a parent id) changes.
    pub fn reset_when<K: PartialEq + 'static>(self, key: impl Fn() -> K + 'static) {
        Effect::new(move |previous: Option<K>| {
            let now = key();
            if previous.is_some_and(|p| p != now) {
                self.reset();
            }
            now
        });
    }

    /// Back to the first page.
    pub fn reset(&self) {
        self.before.set(Vec::new());
        self.current.set(None);
    }

    pub fn is_first(&self) -> bool {
        self.before.with_untracked(Vec::is_empty)
    }

    fn forward(&self, end_cursor: String) {
        self.before.update(|b| b.push(self.current.get_untracked()));
        self.current.set(Some(end_cursor));
    }

    fn back(&self) {
        let mut b = self.before.get_untracked();
        let previous = b.pop().flatten();
        self.before.set(b);
        self.current.set(previous);
    }
}

/// "Previous" and "Next" (ids `<prefix>-prev` and `<prefix>-next`); `next` is the page's end
/// cursor when there is a next page.
#[component]
pub fn PagerNav(cursors: Cursors, next: Option<String>, prefix: &'static str) -> impl IntoView {
    let first = cursors.is_first();
    let last = next.is_none();
    view! {
        <nav class="pager" aria-label="Pages">
            <button type="button" class="secondary small" id=format!("{prefix}-prev") disabled=first
                on:click=move |_| cursors.back()>"Previous"</button>
            <button type="button" class="secondary small" id=format!("{prefix}-next") disabled=last
                on:click=move |_| {
                    if let Some(n) = next.clone() {
                        cursors.forward(n);
                    }
                }>"Next"</button>
        </nav>
    }
}
