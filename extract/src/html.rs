//! HTML through scraper (html5ever): headings, paragraphs, lists, tables and preformatted
//! text; scripts, styles and other non-content elements are dropped.

use scraper::{ElementRef, Html, Node};

use crate::guard::{Kind, Out};
use crate::table;
use crate::text::decode_utf8;
use crate::{ExtractError, Limits};

/// Elements whose content is never text a reader sees.
const DROPPED: &[&str] = &[
    "script", "style", "noscript", "template", "head", "title", "svg", "math", "iframe", "object",
    "embed", "canvas", "select", "option", "datalist", "button", "input", "textarea", "audio",
    "video", "map", "meta", "link",
];

/// Elements that start and end a block of text.
const BLOCKS: &[&str] = &[
    "html",
    "body",
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "nav",
    "aside",
    "blockquote",
    "figure",
    "figcaption",
    "address",
    "dl",
    "dt",
    "dd",
    "form",
    "fieldset",
    "legend",
    "details",
    "summary",
    "center",
    "li",
    "hgroup",
    "caption",
    "hr",
    "tr",
    "td",
    "th",
    "tbody",
    "thead",
    "tfoot",
];

/// Beyond this nesting depth elements are read as plain inline text (no recursion).
const MAX_DEPTH: usize = 256;

pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<String, ExtractError> {
    let source = decode_utf8(bytes);
    let document = Html::parse_document(&source);
    let mut w = Walker {
        out: Out::new(limits),
        para: String::new(),
        pending_space: false,
    };
    w.element(document.root_element(), 0)?;
    w.flush()?;
    Ok(w.out.finish())
}

struct Walker {
    out: Out,
    para: String,
    pending_space: bool,
}

fn is(el: &ElementRef<'_>, names: &[&str]) -> bool {
    names.contains(&el.value().name())
}

impl Walker {
    /// Adds inline text, collapsing whitespace as HTML rendering does.
    fn inline(&mut self, text: &str) {
        for c in text.chars() {
            if c.is_whitespace() {
                self.pending_space = true;
            } else {
                if self.pending_space && !self.para.is_empty() && !self.para.ends_with('\n') {
                    self.para.push(' ');
                }
                self.pending_space = false;
                self.para.push(c);
            }
        }
    }

    fn flush(&mut self) -> Result<(), ExtractError> {
        let text = self
            .para
            .lines()
            .map(str::trim)
            .collect::<Vec<_>>()
            .join("\n");
        self.para.clear();
        self.pending_space = false;
        self.out.block(text.trim())
    }

    fn element(&mut self, el: ElementRef<'_>, depth: usize) -> Result<(), ExtractError> {
        if is(&el, DROPPED) {
            return Ok(());
        }
        if depth > MAX_DEPTH {
            self.inline(&inline_text(el, &[]));
            return Ok(());
        }
        let name = el.value().name();
        match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.flush()?;
                let level: usize = name[1..].parse().unwrap_or(1);
                let text = inline_text(el, &[]);
                if !text.is_empty() {
                    self.out.block(&format!("{} {text}", "#".repeat(level)))?;
                }
            }
            "ul" | "ol" | "menu" => {
                self.flush()?;
                self.list(el, 0, depth)?;
            }
            "table" => {
                self.flush()?;
                self.table(el)?;
            }
            "pre" | "listing" | "xmp" | "plaintext" => {
                self.flush()?;
                let text = raw_text(el);
                let text = text
                    .lines()
                    .map(str::trim_end)
                    .collect::<Vec<_>>()
                    .join("\n");
                self.out.block(text.trim_matches('\n'))?;
            }
            "br" => {
                self.para.push('\n');
                self.pending_space = false;
            }
            _ if BLOCKS.contains(&name) => {
                self.flush()?;
                self.children(el, depth)?;
                self.flush()?;
            }
            _ => self.children(el, depth)?,
        }
        Ok(())
    }

    fn children(&mut self, el: ElementRef<'_>, depth: usize) -> Result<(), ExtractError> {
        for child in el.children() {
            match child.value() {
                Node::Text(t) => self.inline(t),
                Node::Element(_) => {
                    if let Some(c) = ElementRef::wrap(child) {
                        self.element(c, depth + 1)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn list(
        &mut self,
        el: ElementRef<'_>,
        indent: usize,
        depth: usize,
    ) -> Result<(), ExtractError> {
        let ordered = el.value().name() == "ol";
        let mut n: u64 = el
            .value()
            .attr("start")
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1);
        for child in el.children().filter_map(ElementRef::wrap) {
            if is(&child, DROPPED) {
                continue;
            }
            if matches!(child.value().name(), "ul" | "ol" | "menu") {
                // A list directly inside a list (invalid but common).
                if depth < MAX_DEPTH {
                    self.list(child, indent + 1, depth + 1)?;
                }
                continue;
            }
            let text = inline_text(child, &["ul", "ol", "menu"]);
            if !text.is_empty() {
                let marker = if ordered {
                    format!("{n}.")
                } else {
                    "-".to_string()
                };
                let pad = "  ".repeat(indent.min(16));
                self.out
                    .push(Kind::ListItem, &format!("{pad}{marker} {text}"))?;
            }
            n = n.saturating_add(1);
            if depth < MAX_DEPTH {
                for nested in child.descendants().filter_map(ElementRef::wrap) {
                    if matches!(nested.value().name(), "ul" | "ol" | "menu")
                        && nearest_item(nested) == Some(child)
                    {
                        self.list(nested, indent + 1, depth + 1)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn table(&mut self, el: ElementRef<'_>) -> Result<(), ExtractError> {
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut caption = None;
        // Rows of this table only: descend through row groups, not into nested tables.
        let mut pending: Vec<ElementRef<'_>> = el.children().filter_map(ElementRef::wrap).collect();
        pending.reverse();
        while let Some(child) = pending.pop() {
            match child.value().name() {
                "caption" => caption = Some(inline_text(child, &[])),
                "thead" | "tbody" | "tfoot" => {
                    let mut inner: Vec<_> = child.children().filter_map(ElementRef::wrap).collect();
                    inner.reverse();
                    pending.extend(inner);
                }
                "tr" => {
                    let mut row = Vec::new();
                    for cell in child.children().filter_map(ElementRef::wrap) {
                        if !matches!(cell.value().name(), "td" | "th") {
                            continue;
                        }
                        row.push(inline_text(cell, &[]));
                        let span: usize = cell
                            .value()
                            .attr("colspan")
                            .and_then(|s| s.trim().parse().ok())
                            .unwrap_or(1);
                        for _ in 1..span.clamp(1, 1000) {
                            row.push(String::new());
                        }
                    }
                    rows.push(row);
                }
                _ => {}
            }
        }
        if let Some(caption) = caption {
            self.out.block(&caption)?;
        }
        if let Some(md) = table::markdown(&rows) {
            self.out.block(&md)?;
        }
        Ok(())
    }
}

/// The nearest `<li>` enclosing a nested list.
fn nearest_item(el: ElementRef<'_>) -> Option<ElementRef<'_>> {
    el.ancestors()
        .filter_map(ElementRef::wrap)
        .find(|a| a.value().name() == "li")
}

/// Walks the subtree under `el` depth-first without recursion, calling `open` on entering a
/// node (return `false` to skip its children) and `close` on leaving an element whose children
/// were visited.
fn walk<'a>(el: ElementRef<'a>, mut open: impl FnMut(&Node) -> bool, mut close: impl FnMut(&Node)) {
    let root = *el;
    let mut cur = root.first_child();
    while let Some(node) = cur {
        if open(node.value()) {
            if let Some(first) = node.first_child() {
                cur = Some(first);
                continue;
            }
            close(node.value());
        }
        // Next sibling, or climb until one exists.
        let mut at = node;
        cur = loop {
            if let Some(next) = at.next_sibling() {
                break Some(next);
            }
            match at.parent() {
                Some(parent) if parent != root => {
                    close(parent.value());
                    at = parent;
                }
                _ => break None,
            }
        };
    }
}

/// The visible text under `el`, whitespace collapsed, without dropped elements and without the
/// subtrees named in `except`. Iterative, so any nesting depth is safe.
fn inline_text(el: ElementRef<'_>, except: &[&str]) -> String {
    let mut out = String::new();
    let pending_space = std::cell::Cell::new(false);
    walk(
        el,
        |node| match node {
            Node::Element(e) if DROPPED.contains(&e.name()) || except.contains(&e.name()) => false,
            Node::Element(e) => {
                if BLOCKS.contains(&e.name()) || e.name() == "br" {
                    pending_space.set(true);
                }
                true
            }
            Node::Text(t) => {
                for c in t.chars() {
                    if c.is_whitespace() {
                        pending_space.set(true);
                    } else {
                        if pending_space.get() && !out.is_empty() {
                            out.push(' ');
                        }
                        pending_space.set(false);
                        out.push(c);
                    }
                }
                false
            }
            _ => false,
        },
        |node| {
            if let Node::Element(e) = node {
                if BLOCKS.contains(&e.name()) {
                    pending_space.set(true);
                }
            }
        },
    );
    out
}

/// The text under `el` exactly as written (for `<pre>`), without dropped elements.
fn raw_text(el: ElementRef<'_>) -> String {
    let mut out = String::new();
    walk(
        el,
        |node| match node {
            Node::Element(e) if DROPPED.contains(&e.name()) => false,
            Node::Element(e) => {
                if e.name() == "br" {
                    out.push('\n');
                }
                true
            }
            Node::Text(t) => {
                out.push_str(t);
                false
            }
            _ => false,
        },
        |_| {},
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn html(s: &str) -> String {
        extract(s.as_bytes(), &Limits::default()).unwrap_or_else(|e| format!("ERR {e}"))
    }

    #[test]
    fn headings_paragraphs_and_dropped_elements() {
        let t = html(
            "<html><head><title>T</title><style>p{}</style></head><body>\
             <script>var x = 1;</script><h1>Main  title</h1><p>Hello <b>big</b>\n world.</p>\
             <noscript>enable js</noscript><div>one<br>two</div><h3>Sub</h3></body></html>",
        );
        assert_eq!(t, "# Main title\n\nHello big world.\n\none\ntwo\n\n### Sub");
    }

    #[test]
    fn lists_nest_and_number() {
        let t = html("<ol start=3><li>a<ul><li>b</li></ul></li><li>c</li></ol><p>after</p>");
        assert_eq!(t, "3. a\n  - b\n4. c\n\nafter");
    }

    #[test]
    fn tables_become_markdown() {
        let t = html(
            "<table><caption>Crew</caption><thead><tr><th>Name</th><th>Role</th></tr></thead>\
             <tbody><tr><td>Ann</td><td>Lead | Pilot</td></tr>\
             <tr><td colspan=2>all</td></tr></tbody></table>",
        );
        assert_eq!(
            t,
            "Crew\n\n| Name | Role |\n| --- | --- |\n| Ann | Lead \\| Pilot |\n| all |  |"
        );
    }

    #[test]
    fn pre_keeps_lines() {
        assert_eq!(html("<pre>  a\n    b  \n</pre>"), "  a\n    b");
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let deep = format!("{}deep{}", "<div>".repeat(20_000), "</div>".repeat(20_000));
        assert_eq!(html(&deep), "deep");
    }
}
