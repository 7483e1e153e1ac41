//! The tools' text contracts (seed 004 "Tool surface" and its load-bearing behaviours, seed
//! 001's `kg_query`): what an LLM reads. Pure functions of what the service returned.

use std::fmt::Write as _;

use entity::prelude::{Corpus, Document};

use crate::domain::search::Relevance;
use crate::service::search::SearchOutcome;
use crate::service::{AnswerOutcome, DocumentPage};

/// What a recoverable mistake concerned, for the next step the answer suggests.
pub enum Recoverable {
    Search,
    Document(i64),
    Entity,
    Corpus(i64),
    Nothing,
}

/// The first line of `search_documents`: the in-band relevance signal.
pub fn relevance_line(r: Relevance) -> &'static str {
    match r {
        Relevance::High => "**Search relevance: HIGH**",
        Relevance::Moderate => "**Search relevance: MODERATE**",
        Relevance::Low => {
            "**Search relevance: LOW** The documents you can read do not contain this content: \
             do not re-search with different keywords."
        }
        Relevance::LexicalMatch => {
            "**Search relevance: LEXICAL MATCH** The best excerpts share your words rather than \
             your meaning: check that they answer the question."
        }
    }
}

fn rank(r: Option<u32>) -> String {
    r.map_or_else(|| "-".to_owned(), |n| n.to_string())
}

/// `search_documents`: the relevance line, any notices, the synthesis when a chat model
/// wrote one, then every excerpt in full (never truncated), each under its
/// `[Source N (document_id=…), relevance: …%, vec#…/lex#…]` line.
pub fn search(found: &SearchOutcome, synthesis: Option<&AnswerOutcome>) -> String {
    let mut out = String::new();
    out.push_str(relevance_line(found.relevance));
    out.push('\n');
    for n in &found.notices {
        let _ = writeln!(out, "Note: {n}");
    }
    if found.hits.is_empty() {
        out.push_str("\nNo excerpts: none of the documents you can read match.\n");
        return out;
    }
    if let Some(a) = synthesis {
        out.push_str("\n## Synthesis\n\n");
        out.push_str(a.answer.trim_end());
        out.push('\n');
    }
    out.push_str("\n## Sources\n");
    for (i, h) in found.hits.iter().enumerate() {
        let pct = (f64::from(h.rank.score) * 100.0).round().max(0.0);
        let _ = writeln!(
            out,
            "\n[Source {} (document_id={}), relevance: {pct:.0}%, vec#{}/lex#{}]",
            i + 1,
            h.chunk.document_id,
            rank(h.rank.vector_rank),
            rank(h.rank.lexical_rank),
        );
        let _ = write!(out, "From \"{}\"", h.chunk.title);
        if let Some(s) = h.chunk.section.as_deref().filter(|s| !s.is_empty()) {
            let _ = write!(out, ", section \"{s}\"");
        }
        let _ = writeln!(out, " (version {}):", h.chunk.version);
        // The excerpt itself, whole: no length bound here (seed 004, behaviour 2).
        out.push_str(&h.chunk.content);
        out.push('\n');
    }
    out
}

/// `get_document_text`: a heading line, the page, and for a multi-page document the calls
/// to the next and previous pages and the `search_documents` alternative.
pub fn document_page(d: &DocumentPage) -> String {
    let id = d.document.id;
    let mut out = format!(
        "# {} (document_id={id}, version {})",
        d.document.title, d.version
    );
    if d.page_count > 1 {
        let _ = write!(out, ", page {} of {}", d.page, d.page_count);
    }
    out.push_str("\n\n");
    if d.page_count > 1 {
        out.push_str(d.text.trim_end());
        out.push('\n');
        let _ = writeln!(out, "\n---\nPage {} of {}.", d.page, d.page_count);
        if d.page < d.page_count {
            let _ = writeln!(
                out,
                "Next page: get_document_text(document_id={id}, page={})",
                d.page + 1
            );
        }
        if d.page > 1 {
            let _ = writeln!(
                out,
                "Previous page: get_document_text(document_id={id}, page={})",
                d.page - 1
            );
        }
        let _ = writeln!(
            out,
            "To find a passage without reading every page: search_documents(query=\"...\", corpus_ids=[{}])",
            d.document.corpus_id
        );
    } else {
        out.push_str(&d.text);
    }
    out
}

/// `kg_query`: the service's lines (one fact each, cited), or what to do when there are none.
pub fn facts(lines: &str, name: Option<&str>, id: Option<i64>) -> String {
    if lines.trim().is_empty() {
        let who = name.map_or_else(
            || format!("entity {}", id.unwrap_or_default()),
            |n| format!("\"{n}\""),
        );
        return format!(
            "No facts about {who} in the documents you can read. Try search_documents for the passages that mention it.\n"
        );
    }
    lines.to_owned()
}

/// `knowledge_summary`: the `[KNOWLEDGE]` line.
pub fn knowledge(line: Option<&str>) -> String {
    match line {
        // The service's line names the GraphQL field; an agent calls the tool.
        Some(l) => format!(
            "[KNOWLEDGE] {}\n",
            l.replace("Use `search` to", "Use `search_documents` to")
        ),
        None => "[KNOWLEDGE] Your team has no corpora yet: create one with create_corpus(name=\"...\").\n"
            .to_owned(),
    }
}

/// `suggested_context`: the service's `[SUGGESTED CONTEXT]` block, or a sentence when it is
/// empty (nothing matched, no system corpora, or a failure, which the service logs).
pub fn suggested(block: &str) -> String {
    if block.trim().is_empty() {
        return "No suggested context for this message.\n".to_owned();
    }
    block.to_owned()
}

pub fn corpus_created(c: &Corpus) -> String {
    format!(
        "Created corpus \"{}\" (corpus_id={}). Upload documents into it, or move documents into it with move_documents(to_corpus_id={}, document_ids=[...]).\n",
        c.name, c.id, c.id
    )
}

pub fn moved(n: u64, to: i64) -> String {
    if n == 0 {
        return format!(
            "Moved no documents: none of those you may move matched (documents already in corpus_id={to} stay). Call move_documents(to_corpus_id={to}) without document_ids to list the documents you may move.\n"
        );
    }
    format!(
        "Moved {n} document{} into corpus_id={to}.\n",
        if n == 1 { "" } else { "s" }
    )
}

/// `move_documents` without ids or `move_all`: the documents, corpus by corpus.
pub fn movable(corpora: &[Corpus], docs: &[Document], to: i64) -> String {
    if docs.is_empty() {
        return "No documents to move: your team's corpora hold no documents you can read.\n"
            .to_owned();
    }
    let mut out = format!(
        "Give document_ids (or move_all=true, with from_corpus_id to move one corpus) to move documents into corpus_id={to}. The documents you can read:\n"
    );
    for c in corpora {
        let mine: Vec<&Document> = docs.iter().filter(|d| d.corpus_id == c.id).collect();
        if mine.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\nCorpus \"{}\" (corpus_id={}):", c.name, c.id);
        for d in mine {
            let _ = writeln!(out, "- document_id={}: {}", d.id, d.title);
        }
    }
    out
}

/// The service names arguments as GraphQL does; the tools' are snake_case.
fn tool_words(s: &str) -> String {
    s.replace("topK", "top_k")
        .replace("corpusIds", "corpus_ids")
        .replace("documentIds", "document_ids")
        .replace("fromCorpusId", "from_corpus_id")
}

pub fn not_found(what: &str, hint: &Recoverable) -> String {
    let next = match hint {
        Recoverable::Document(id) => format!(
            "No document with document_id={id} is visible to you. Use search_documents to find the document ids you can read."
        ),
        Recoverable::Entity => "No such entity in the documents you can read. Use search_documents to find passages about it instead.".to_owned(),
        Recoverable::Corpus(id) => format!(
            "No corpus with corpus_id={id} (or no such document) is visible to you. Call knowledge_summary for your corpora's ids, or create one with create_corpus."
        ),
        Recoverable::Search => format!(
            "No such {what}: check corpus_ids against knowledge_summary, or leave corpus_ids out to search everything you can read."
        ),
        Recoverable::Nothing => format!("No such {what} is visible to you."),
    };
    format!("{next}\n")
}

pub fn invalid(msg: &str, hint: &Recoverable) -> String {
    let msg = tool_words(msg);
    let next = match hint {
        Recoverable::Document(id) => {
            format!(" Call get_document_text(document_id={id}, page=1) to start at the first page.")
        }
        Recoverable::Entity => " Give a name or an id, and hops between 0 and 2.".to_owned(),
        _ => " Correct the arguments and call the tool again.".to_owned(),
    };
    format!("Invalid input: {msg}.{next}\n")
}

pub fn conflict(msg: &str) -> String {
    format!("Not done: {msg}. Call knowledge_summary to see what exists.\n")
}

pub fn later(msg: &str) -> String {
    format!("Not done now: {msg}.\n")
}

pub fn system_corpus(msg: &str) -> String {
    format!(
        "Not allowed: {msg}. Choose one of your team's corpora (knowledge_summary lists them).\n"
    )
}

pub fn forbidden(msg: &str) -> String {
    format!("Not allowed: {msg}. Your role does not permit this; ask a team admin.\n")
}

/// `classify_document`: the `classification_result` card as text.
pub fn classification(document_id: i64, c: &entity::prelude::Classification) -> String {
    format!(
        "[CLASSIFICATION] document_id={document_id} version={}\ntype: {}\nconfidence: {:.2} ({})\nreason: {}\n",
        c.version,
        c.type_name,
        c.confidence,
        if c.method == "llm" {
            format!("model {}", c.model)
        } else {
            format!("zero-shot, embedder {}", c.model)
        },
        c.reason
    )
}

/// Most rows of a table an extraction result shows before saying how many it left out.
const SHOWN_ROWS: usize = 20;

/// `extract_document`: the `extraction_result` card as text: each value with its evidence,
/// or each table (typed columns, rows as JSON lines), then the measured schema.
pub fn extraction(document_id: i64, x: &crate::service::ExtractionView) -> String {
    let mut out = format!("[EXTRACTION] document_id={document_id} mode={}\n", x.mode);
    if x.mode == "schema" {
        if let Some(fields) = x.data.get("fields").and_then(|f| f.as_object()) {
            for (name, f) in fields {
                match f.get("evidence").and_then(|e| e.as_str()) {
                    Some(ev) => {
                        let _ = writeln!(out, "- {name}: {}  (evidence: \"{ev}\")", f["value"]);
                    }
                    None => {
                        let _ = writeln!(out, "- {name}: null (not stated in the document)");
                    }
                }
            }
        }
    } else {
        let tables = x.data.get("tables").and_then(|t| t.as_array());
        match tables {
            Some(ts) if !ts.is_empty() => {
                for t in ts {
                    let rows = t["rows"].as_array().map(Vec::as_slice).unwrap_or_default();
                    let cols: Vec<String> = t["columns"]
                        .as_array()
                        .map(Vec::as_slice)
                        .unwrap_or_default()
                        .iter()
                        .map(|c| {
                            format!(
                                "{} ({})",
                                c["name"].as_str().unwrap_or(""),
                                c["type"].as_str().unwrap_or("")
                            )
                        })
                        .collect();
                    let page = t["page"]
                        .as_u64()
                        .map(|p| format!(", page {p}"))
                        .unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "\n## {}{page}: {} rows\ncolumns: {}",
                        t["name"].as_str().unwrap_or("table"),
                        rows.len(),
                        cols.join(", ")
                    );
                    for r in rows.iter().take(SHOWN_ROWS) {
                        let _ = writeln!(out, "{r}");
                    }
                    if rows.len() > SHOWN_ROWS {
                        let _ = writeln!(out, "({} more rows)", rows.len() - SHOWN_ROWS);
                    }
                }
            }
            _ => out.push_str("The document has no tables.\n"),
        }
    }
    let _ = write!(out, "\nschema (measured): {}\n", x.measured_schema);
    if x.spent.calls > 0 {
        let _ = writeln!(
            out,
            "cost: {} model calls, ${:.6}",
            x.spent.calls, x.spent.cost_usd
        );
    }
    out
}

/// `process_document`: what the job found, or where it stands.
pub fn processed(
    document_id: i64,
    job: &entity::prelude::Job,
    result: Option<&entity::prelude::ProcessingResult>,
) -> String {
    let mut out = format!(
        "[PROCESSING] document_id={document_id} job={} state={}\n",
        job.id,
        job.state.as_str()
    );
    if let Some(e) = &job.error {
        let _ = writeln!(out, "error: {e}");
    }
    match result {
        Some(r) => {
            let _ = writeln!(
                out,
                "type: {} (confidence {:.2}, {}){}",
                r.type_name,
                r.confidence,
                r.method,
                if r.extended_taxonomy {
                    "; added to the taxonomy"
                } else {
                    ""
                }
            );
            if r.schema_generated {
                out.push_str("schema: written by the model for this type\n");
            }
            let _ = writeln!(out, "result: {}", r.result);
            let _ = writeln!(out, "schema (measured): {}", r.measured_schema);
        }
        None if job.state.is_terminal() => out.push_str("No result was stored.\n"),
        None => out.push_str(
            "Still running: call process_document again with this job_id to see the result.\n",
        ),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relevance_lines_start_with_the_banner() {
        for r in [
            Relevance::High,
            Relevance::Moderate,
            Relevance::Low,
            Relevance::LexicalMatch,
        ] {
            assert!(relevance_line(r).starts_with("**Search relevance: "));
        }
        assert!(relevance_line(Relevance::Low).contains("do not re-search"));
    }

    #[test]
    fn argument_names_are_the_tools() {
        assert_eq!(
            tool_words("topK must be between 1 and 100"),
            "top_k must be between 1 and 100"
        );
    }
}
