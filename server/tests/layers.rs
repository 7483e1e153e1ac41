//! The layer rules of ARCHITECTURE.md that Rust's privacy cannot express (sibling modules of
//! one crate always see each other), checked on the crate's own source, parsed as Rust with
//! `syn` (comments and doc links do not count):
//!
//! - only `store/` names `sea_orm`, `sqlx` or `migration`;
//! - only `graphql/` and `http/graphql.rs` name `async_graphql`; only `http/` and `app.rs`
//!   name `axum` or `tower_http`; only `mcp/` names `rmcp`;
//! - each layer names only the layers below it (`graphql` → `service`, `domain`; `http` →
//!   `graphql`, `mcp`, `service`; `mcp` → `service`, `domain`; `store` → `auth`, `domain`;
//!   ...), and `graphql`/`mcp`/`http` never reach
//!   through the core's fields (`.store`, `.bus`, `.queue`, `.blobs`);
//! - no two files import each other, directly or around a circle.
//!
//! `forbidden_import_is_caught` shows each check fails on a file that breaks it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// What one file names: the first segment of every path (`sea_orm`, `crate`, `super`...),
/// every `crate::`/`super::`-rooted path resolved to module segments, and field names read.
#[derive(Default, Debug)]
struct Names {
    roots: BTreeSet<String>,
    /// Absolute module paths (without `crate`), e.g. `["store", "kg", "KgEntity"]`.
    crate_paths: Vec<Vec<String>>,
    fields: BTreeSet<String>,
}

struct Collector<'a> {
    module: &'a [String],
    names: Names,
}

impl Collector<'_> {
    fn path(&mut self, segments: Vec<String>) {
        let Some(first) = segments.first() else {
            return;
        };
        self.names.roots.insert(first.clone());
        let mut abs: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "super" | "self" => self.module.to_vec(),
            _ => return,
        };
        for s in &segments {
            match s.as_str() {
                "crate" => {}
                "self" => {}
                "super" => {
                    abs.pop();
                }
                other => abs.push(other.to_owned()),
            }
        }
        self.names.crate_paths.push(abs);
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut full = prefix.clone();
                if n.ident != "self" {
                    full.push(n.ident.to_string());
                }
                self.path(full);
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                full.push(r.ident.to_string());
                self.path(full);
            }
            syn::UseTree::Glob(_) => self.path(prefix.clone()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut prefix = Vec::new();
        self.use_tree(&mut prefix, &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        self.path(p.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, p);
    }

    fn visit_expr_field(&mut self, f: &'ast syn::ExprField) {
        if let syn::Member::Named(n) = &f.member {
            self.names.fields.insert(n.to_string());
        }
        syn::visit::visit_expr_field(self, f);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        // `#[cfg(test)] mod tests { … }` may use anything (it is not part of the build).
        let is_test = m.attrs.iter().any(|a| {
            a.path().is_ident("cfg")
                && a.parse_args::<syn::Meta>()
                    .is_ok_and(|meta| meta.path().is_ident("test"))
        });
        if !is_test {
            syn::visit::visit_item_mod(self, m);
        }
    }
}

/// A source file, its module path (`graphql/types.rs` → `["graphql", "types"]`) and names.
struct SourceFile {
    rel: String,
    module: Vec<String>,
    names: Names,
}

fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts
}

fn parse(rel: &str, module: Vec<String>, text: &str) -> SourceFile {
    let file = syn::parse_file(text).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let mut c = Collector {
        module: &module,
        names: Names::default(),
    };
    c.visit_file(&file);
    SourceFile {
        rel: rel.to_owned(),
        names: c.names,
        module,
    }
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The crate's library files (the binary's `main.rs`, `bulk.rs` and `remote.rs` are callers
/// of the public face, which the compiler already polices).
fn library() -> Vec<SourceFile> {
    let src = manifest_dir().join("src");
    let mut paths = Vec::new();
    rs_files(&src, &mut paths);
    paths
        .into_iter()
        .filter_map(|p| {
            let rel = p.strip_prefix(&src).ok()?.to_path_buf();
            let rel_s = rel.to_string_lossy().into_owned();
            if ["main.rs", "bulk.rs", "remote.rs"].contains(&rel_s.as_str()) {
                return None;
            }
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{rel_s}: {e}"));
            Some(parse(&rel_s, module_of(&rel), &text))
        })
        .collect()
}

/// The layers each top-level module may name (besides itself). `lib` is the public face.
fn allowed_layers(top: &str) -> &'static [&'static str] {
    match top {
        "domain" => &[],
        "auth" => &["domain"],
        "store" => &["auth", "domain"],
        "events" => &["store"],
        "jobs" => &["events", "store", "domain"],
        "ingest" => &["jobs", "store", "auth", "domain"],
        "knowledge" => &["jobs", "store", "auth", "domain", "roles"],
        "processing" => &["jobs", "store", "auth", "domain", "roles"],
        "roles" => &["store", "domain"],
        "service" => &[
            "auth",
            "domain",
            "store",
            "events",
            "jobs",
            "ingest",
            "knowledge",
            "processing",
            "roles",
        ],
        "graphql" => &["service", "domain"],
        "mcp" => &["service", "domain"],
        "http" => &["graphql", "mcp", "service"],
        "config" => &["domain", "knowledge", "service"],
        "testing" => &["store", "ingest"],
        _ => &[
            "app",
            "auth",
            "config",
            "domain",
            "events",
            "graphql",
            "http",
            "ingest",
            "jobs",
            "knowledge",
            "mcp",
            "processing",
            "roles",
            "service",
            "store",
            "testing",
        ],
    }
}

/// The external crates a file may name, by where it sits.
fn crate_rule(f: &SourceFile) -> Vec<String> {
    let top = f.module.first().map(String::as_str).unwrap_or("lib");
    let mut broken = Vec::new();
    for root in &f.names.roots {
        let allowed = match root.as_str() {
            "sea_orm" | "sqlx" | "migration" => top == "store",
            "async_graphql" | "async_graphql_axum" | "async_graphql_value" => {
                top == "graphql" || f.rel == "http/graphql.rs"
            }
            "axum" | "tower_http" => top == "http" || top == "app",
            "rmcp" => top == "mcp",
            _ => true,
        };
        if !allowed {
            broken.push(format!("{} names `{root}`", f.rel));
        }
    }
    broken
}

fn layer_rule(f: &SourceFile) -> Vec<String> {
    let top = f.module.first().map(String::as_str).unwrap_or("lib");
    let allowed = allowed_layers(top);
    let mut broken = BTreeSet::new();
    for p in &f.names.crate_paths {
        let Some(target) = p.first() else { continue };
        if target != top && !allowed.contains(&target.as_str()) && is_module(target) {
            broken.insert(format!("{} names `crate::{}`", f.rel, p.join("::")));
        }
    }
    if top == "graphql" || top == "http" || top == "mcp" {
        for field in ["store", "bus", "queue", "blobs"] {
            if f.names.fields.contains(field) {
                broken.insert(format!("{} reads the core's `.{field}`", f.rel));
            }
        }
    }
    broken.into_iter().collect()
}

fn is_module(name: &str) -> bool {
    allowed_layers("lib").contains(&name)
}

/// File → files it names (a path resolves to the longest module prefix that is a file).
fn import_graph(files: &[SourceFile]) -> BTreeMap<String, BTreeSet<String>> {
    let by_module: BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|f| (f.module.clone(), f.rel.clone()))
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let edges = graph.entry(f.rel.clone()).or_default();
        for p in &f.names.crate_paths {
            let target = (1..=p.len())
                .rev()
                .find_map(|n| by_module.get(&p[..n]))
                .cloned();
            // A file naming its own submodule (`mod.rs` → `mod.rs/x.rs`) is the module
            // declaring it, not an import; only edges between distinct files count.
            if let Some(t) = target {
                if t != f.rel && !p.starts_with(&f.module) {
                    edges.insert(t);
                }
            }
        }
    }
    graph
}

/// Every circle of the graph, each as the files on it (Tarjan's strongly connected parts).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'g> {
        g: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on: BTreeSet<&'g str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    impl<'g> T<'g> {
        fn visit(&mut self, v: &'g str) {
            self.index.insert(v, self.next);
            self.low.insert(v, self.next);
            self.next += 1;
            self.stack.push(v);
            self.on.insert(v);
            if let Some(ws) = self.g.get(v) {
                for w in ws {
                    let w = w.as_str();
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let lw = self.low[w];
                        let lv = self.low[v];
                        self.low.insert(v, lv.min(lw));
                    } else if self.on.contains(w) {
                        let iw = self.index[w];
                        let lv = self.low[v];
                        self.low.insert(v, lv.min(iw));
                    }
                }
            }
            if self.low[v] == self.index[v] {
                let mut part = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    part.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if part.len() > 1 {
                    part.sort();
                    self.out.push(part);
                }
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.out
}

/// The library files, with the `lib.rs` face (which re-exports from every layer) left out
/// of the circle check: it is the root that declares the modules, not one of them.
fn check(files: &[SourceFile]) -> Vec<String> {
    let mut broken: Vec<String> = files
        .iter()
        .flat_map(|f| crate_rule(f).into_iter().chain(layer_rule(f)))
        .collect();
    let inner: Vec<&SourceFile> = files.iter().filter(|f| !f.module.is_empty()).collect();
    let owned: Vec<SourceFile> = inner
        .iter()
        .map(|f| SourceFile {
            rel: f.rel.clone(),
            module: f.module.clone(),
            names: Names {
                roots: BTreeSet::new(),
                crate_paths: f.names.crate_paths.clone(),
                fields: BTreeSet::new(),
            },
        })
        .collect();
    for c in circles(&import_graph(&owned)) {
        broken.push(format!("import circle: {}", c.join(" ↔ ")));
    }
    broken
}

#[test]
fn the_layers_hold() {
    let files = library();
    assert!(files.len() > 30, "read {} files", files.len());
    let broken = check(&files);
    assert!(
        broken.is_empty(),
        "layer rules broken:\n{}",
        broken.join("\n")
    );
}

/// Each rule fails on a file that breaks it: the same source plus one forbidden line.
#[test]
fn forbidden_import_is_caught() {
    let base = library();
    let with = |rel: &str, extra: &str| -> Vec<String> {
        let mut files: Vec<SourceFile> = library().into_iter().filter(|f| f.rel != rel).collect();
        let src = manifest_dir().join("src").join(rel);
        let text = std::fs::read_to_string(&src).unwrap_or_else(|e| panic!("{rel}: {e}"));
        files.push(parse(
            rel,
            module_of(Path::new(rel)),
            &format!("{text}\n{extra}\n"),
        ));
        check(&files)
    };
    assert!(check(&base).is_empty());
    let cases = [
        (
            "graphql/types.rs",
            "use crate::store::Store;",
            "graphql/types.rs names `crate::store::Store`",
        ),
        (
            "graphql/kg.rs",
            "use sea_orm::EntityTrait;",
            "graphql/kg.rs names `sea_orm`",
        ),
        (
            "service/search.rs",
            "use async_graphql::ID;",
            "service/search.rs names `async_graphql`",
        ),
        (
            "http/mod.rs",
            "use async_graphql::ID;",
            "http/mod.rs names `async_graphql`",
        ),
        (
            "http/mod.rs",
            "fn f(c: &crate::service::Cairn) { let _ = &c.store; }",
            "http/mod.rs reads the core's `.store`",
        ),
        (
            "http/mod.rs",
            "use rmcp::ServerHandler;",
            "http/mod.rs names `rmcp`",
        ),
        (
            "service/search.rs",
            "use rmcp::model::CallToolResult;",
            "service/search.rs names `rmcp`",
        ),
        (
            "mcp/mod.rs",
            "use crate::store::Store;",
            "mcp/mod.rs names `crate::store::Store`",
        ),
        (
            "mcp/text.rs",
            "use crate::graphql::CairnSchema;",
            "mcp/text.rs names `crate::graphql::CairnSchema`",
        ),
        (
            "mcp/mod.rs",
            "fn f(c: &crate::service::Cairn) { let _ = &c.bus; }",
            "mcp/mod.rs reads the core's `.bus`",
        ),
        ("mcp/mod.rs", "use axum::Router;", "mcp/mod.rs names `axum`"),
        (
            "graphql/types.rs",
            "use crate::mcp::McpEndpoint;",
            "graphql/types.rs names `crate::mcp::McpEndpoint`",
        ),
        (
            "store/search.rs",
            "use crate::service::Cairn;",
            "store/search.rs names `crate::service::Cairn`",
        ),
        (
            "events.rs",
            "use crate::jobs::JobKind;",
            "events.rs names `crate::jobs::JobKind`",
        ),
        (
            "store/kg.rs",
            "use super::documents::StoreIngest;",
            "import circle",
        ),
    ];
    for (rel, line, expect) in cases {
        let broken = with(rel, line);
        assert!(
            broken.iter().any(|b| b.contains(expect)),
            "adding `{line}` to {rel} was not caught (wanted `{expect}`): {broken:?}"
        );
    }
}

/// This crate's directory: the run-time `CARGO_MANIFEST_DIR` cargo sets for `cargo test` first,
/// the compile-time one only outside cargo (a shared target dir can hold a binary built from
/// another checkout, whose compile-time path is stale).
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}
