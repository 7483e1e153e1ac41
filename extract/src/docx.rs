//! DOCX: the main document part, streamed with quick-xml. Paragraph styles give heading levels
//! (`Title` → 1, `Heading N` → N, or an outline level), numbered paragraphs become list items,
//! tables become Markdown tables.

use std::collections::HashMap;

use quick_xml::events::{BytesStart, Event};

use crate::guard::{Kind, Out, ZipReader};
use crate::table::{self, TableBuilder};
use crate::xml::{self, local, Ns, Reader};
use crate::{ExtractError, Limits};

const OFFICE_DOCUMENT: &str = "/officeDocument";
const STYLES: &str = "/styles";

pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<String, ExtractError> {
    let mut zip = ZipReader::new(bytes, limits)?;
    let main = main_part(&mut zip)?;
    let Some(document) = zip.read(&main)? else {
        return Err(ExtractError::Corrupt(format!(
            "the document has no main part ({main})"
        )));
    };
    let styles = match styles_part(&mut zip, &main)? {
        Some(path) => match zip.read(&path)? {
            Some(xml) => heading_styles(&xml, &path)?,
            None => HashMap::new(),
        },
        None => HashMap::new(),
    };
    render(&document, &main, &styles, limits)
}

/// The main document part, from the package relationships (usually `word/document.xml`).
fn main_part(zip: &mut ZipReader<'_>) -> Result<String, ExtractError> {
    if let Some(rels) = zip.read("_rels/.rels")? {
        for rel in xml::relationships(&rels, "_rels/.rels")? {
            if rel.kind.ends_with(OFFICE_DOCUMENT) && !rel.external {
                return Ok(crate::guard::resolve_part("", &rel.target));
            }
        }
    }
    Ok("word/document.xml".to_string())
}

fn styles_part(zip: &mut ZipReader<'_>, main: &str) -> Result<Option<String>, ExtractError> {
    let rels_path = xml::rels_path(main);
    if let Some(rels) = zip.read(&rels_path)? {
        for rel in xml::relationships(&rels, &rels_path)? {
            if rel.kind.ends_with(STYLES) && !rel.external {
                return Ok(Some(crate::guard::resolve_part(
                    xml::dir_of(main),
                    &rel.target,
                )));
            }
        }
    }
    let fallback = format!("{}/styles.xml", xml::dir_of(main));
    Ok(zip.has(&fallback).then_some(fallback))
}

#[derive(Debug, Default)]
struct Style {
    name: String,
    based_on: Option<String>,
    outline: Option<u32>,
    numbered: bool,
}

/// What a paragraph style makes of its paragraphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StyleKind {
    /// A heading of this level (1..=6).
    Heading(u8),
    /// A list item (the style carries numbering, like "List Bullet").
    ListItem,
}

/// Style id → heading level or list item, resolving `basedOn` chains.
fn heading_styles(
    xml_bytes: &[u8],
    part: &str,
) -> Result<HashMap<String, StyleKind>, ExtractError> {
    let mut r = Reader::new(xml_bytes, part);
    let mut styles: HashMap<String, Style> = HashMap::new();
    let mut current: Option<(String, Style)> = None;
    let mut in_ppr = false;
    loop {
        let (ns, ev) = r.next()?;
        match ev {
            Event::Start(ref e) | Event::Empty(ref e) if ns == Ns::W => {
                let empty = matches!(ev, Event::Empty(_));
                match local(e.name()).as_ref() {
                    b"style" => {
                        let id = r.attr_in(e, Ns::W, b"styleId").unwrap_or_default();
                        let is_para = r
                            .attr_in(e, Ns::W, b"type")
                            .is_none_or(|t| t == "paragraph");
                        current = (is_para && !empty).then(|| (id, Style::default()));
                    }
                    b"name" => {
                        if let Some((_, s)) = current.as_mut() {
                            s.name = r.attr_in(e, Ns::W, b"val").unwrap_or_default();
                        }
                    }
                    b"basedOn" => {
                        if let Some((_, s)) = current.as_mut() {
                            s.based_on = r.attr_in(e, Ns::W, b"val");
                        }
                    }
                    b"pPr" if !empty => in_ppr = true,
                    b"outlineLvl" if in_ppr => {
                        if let Some((_, s)) = current.as_mut() {
                            s.outline = r
                                .attr_in(e, Ns::W, b"val")
                                .and_then(|v| v.trim().parse().ok());
                        }
                    }
                    b"numPr" if in_ppr => {
                        if let Some((_, s)) = current.as_mut() {
                            s.numbered = true;
                        }
                    }
                    _ => {}
                }
            }
            Event::End(ref e) if ns == Ns::W => match local(e.name()).as_ref() {
                b"style" => {
                    if let Some((id, s)) = current.take() {
                        styles.insert(id, s);
                    }
                }
                b"pPr" => in_ppr = false,
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
    }
    let mut levels = HashMap::new();
    for id in styles.keys() {
        let mut at = Some(id.as_str());
        for _ in 0..16 {
            let Some(style) = at.and_then(|i| styles.get(i)) else {
                break;
            };
            if let Some(level) = level_of_style(&style.name, style.outline) {
                levels.insert(id.clone(), StyleKind::Heading(level));
                break;
            }
            if style.numbered {
                levels.insert(id.clone(), StyleKind::ListItem);
                break;
            }
            at = style.based_on.as_deref();
        }
    }
    Ok(levels)
}

/// The heading level of a style with this (built-in, English) name and outline level.
fn level_of_style(name: &str, outline: Option<u32>) -> Option<u8> {
    let name = name.trim().to_ascii_lowercase();
    if name == "title" {
        return Some(1);
    }
    if let Some(n) = name.strip_prefix("heading") {
        if let Ok(n) = n.trim().parse::<u8>() {
            if (1..=9).contains(&n) {
                return Some(n.min(6));
            }
        }
    }
    outline_level(outline)
}

/// `w:outlineLvl` 0..=8 is a heading of level 1..=9 (capped at 6); 9 means body text.
fn outline_level(outline: Option<u32>) -> Option<u8> {
    match outline {
        Some(n @ 0..=8) => Some(u8::try_from(n + 1).unwrap_or(6).min(6)),
        _ => None,
    }
}

/// When no styles part resolves a style id, the usual ids still say what they are.
fn level_of_style_id(id: &str) -> Option<u8> {
    let lower = id.to_ascii_lowercase();
    if lower == "title" {
        return Some(1);
    }
    let n = lower.strip_prefix("heading")?;
    let n: u8 = n.parse().ok()?;
    (1..=9).contains(&n).then_some(n.min(6))
}

#[derive(Debug, Default)]
struct Para {
    text: String,
    style: Option<String>,
    outline: Option<u32>,
    list_level: Option<usize>,
}

enum Frame {
    Para(Para),
    Table(TableBuilder),
}

/// Subtrees whose text must not be read: the fallback copy of alternate content, and the
/// "before" properties of tracked changes.
fn skipped(ns: Ns, name: &[u8]) -> bool {
    match ns {
        Ns::Mc => name == b"Fallback",
        Ns::W => matches!(
            name,
            b"pPrChange"
                | b"rPrChange"
                | b"sectPrChange"
                | b"tblPrChange"
                | b"trPrChange"
                | b"tcPrChange"
                | b"numberingChange"
                | b"moveFrom"
        ),
        _ => false,
    }
}

fn render(
    document: &[u8],
    part: &str,
    styles: &HashMap<String, StyleKind>,
    limits: &Limits,
) -> Result<String, ExtractError> {
    let mut r = Reader::new(document, part);
    let mut out = Out::new(limits);
    let mut stack: Vec<Frame> = Vec::new();
    let mut skip = 0usize;
    let mut in_t = false;
    let mut in_ppr = false;
    loop {
        let (ns, ev) = r.next()?;
        if skip > 0 {
            match ev {
                Event::Start(_) => skip += 1,
                Event::End(_) => skip -= 1,
                Event::Eof => break,
                _ => {}
            }
            continue;
        }
        match ev {
            Event::Start(ref e) => {
                let name = local(e.name());
                if skipped(ns, name.as_ref()) {
                    skip = 1;
                    continue;
                }
                if ns == Ns::W {
                    start(&r, e, name.as_ref(), &mut stack, &mut in_t, &mut in_ppr);
                }
            }
            Event::Empty(ref e) => {
                let name = local(e.name());
                if ns == Ns::W {
                    let n = name.as_ref();
                    start(&r, e, n, &mut stack, &mut in_t, &mut in_ppr);
                    if matches!(n, b"p" | b"tbl" | b"tr" | b"tc" | b"t" | b"pPr") {
                        end(n, &mut stack, &mut in_t, &mut in_ppr, styles, &mut out)?;
                    }
                }
            }
            Event::End(ref e) if ns == Ns::W => {
                let name = local(e.name());
                end(
                    name.as_ref(),
                    &mut stack,
                    &mut in_t,
                    &mut in_ppr,
                    styles,
                    &mut out,
                )?;
            }
            Event::Text(ref t) if in_t => {
                if let Some(Frame::Para(p)) = stack.last_mut() {
                    p.text.push_str(&xml::text(t));
                }
            }
            Event::CData(ref t) if in_t => {
                if let Some(Frame::Para(p)) = stack.last_mut() {
                    p.text.push_str(&String::from_utf8_lossy(t));
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    // A truncated part may leave frames open: deliver what they hold.
    while let Some(frame) = stack.pop() {
        close_frame(frame, &mut stack, styles, &mut out)?;
    }
    Ok(out.finish())
}

fn start(
    r: &Reader<'_>,
    e: &BytesStart<'_>,
    name: &[u8],
    stack: &mut Vec<Frame>,
    in_t: &mut bool,
    in_ppr: &mut bool,
) {
    match name {
        b"p" => stack.push(Frame::Para(Para::default())),
        b"tbl" => stack.push(Frame::Table(TableBuilder::default())),
        b"tr" => {
            if let Some(Frame::Table(t)) = stack.last_mut() {
                t.start_row();
            }
        }
        b"tc" => {
            if let Some(Frame::Table(t)) = stack.last_mut() {
                t.start_cell();
            }
        }
        b"gridSpan" => {
            if let Some(Frame::Table(t)) = stack.last_mut() {
                if let Some(n) = r.attr_in(e, Ns::W, b"val").and_then(|v| v.parse().ok()) {
                    t.set_span(n);
                }
            }
        }
        b"t" => *in_t = true,
        b"pPr" => *in_ppr = true,
        b"pStyle" if *in_ppr => {
            if let Some(p) = top_para(stack) {
                p.style = r.attr_in(e, Ns::W, b"val");
            }
        }
        b"outlineLvl" if *in_ppr => {
            if let Some(p) = top_para(stack) {
                p.outline = r
                    .attr_in(e, Ns::W, b"val")
                    .and_then(|v| v.trim().parse().ok());
            }
        }
        b"numPr" if *in_ppr => {
            if let Some(p) = top_para(stack) {
                p.list_level.get_or_insert(0);
            }
        }
        b"ilvl" if *in_ppr => {
            if let Some(p) = top_para(stack) {
                let level = r
                    .attr_in(e, Ns::W, b"val")
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                p.list_level = Some(level.min(8));
            }
        }
        b"tab" | b"ptab" if !*in_ppr => {
            if let Some(p) = top_para(stack) {
                p.text.push('\t');
            }
        }
        b"br" | b"cr" => {
            if let Some(p) = top_para(stack) {
                p.text.push('\n');
            }
        }
        b"noBreakHyphen" => {
            if let Some(p) = top_para(stack) {
                p.text.push('-');
            }
        }
        _ => {}
    }
}

fn top_para(stack: &mut [Frame]) -> Option<&mut Para> {
    match stack.last_mut() {
        Some(Frame::Para(p)) => Some(p),
        _ => None,
    }
}

fn end(
    name: &[u8],
    stack: &mut Vec<Frame>,
    in_t: &mut bool,
    in_ppr: &mut bool,
    styles: &HashMap<String, StyleKind>,
    out: &mut Out,
) -> Result<(), ExtractError> {
    match name {
        b"t" => *in_t = false,
        b"pPr" => *in_ppr = false,
        b"p" => {
            if matches!(stack.last(), Some(Frame::Para(_))) {
                if let Some(frame) = stack.pop() {
                    close_frame(frame, stack, styles, out)?;
                }
            }
        }
        b"tbl" => {
            if matches!(stack.last(), Some(Frame::Table(_))) {
                if let Some(frame) = stack.pop() {
                    close_frame(frame, stack, styles, out)?;
                }
            }
        }
        b"tr" => {
            if let Some(Frame::Table(t)) = stack.last_mut() {
                t.end_row();
            }
        }
        b"tc" => {
            if let Some(Frame::Table(t)) = stack.last_mut() {
                t.end_cell();
            }
        }
        _ => {}
    }
    Ok(())
}

/// Delivers a closed paragraph or table to whatever encloses it: a table cell, an enclosing
/// paragraph (text boxes), or the output.
fn close_frame(
    frame: Frame,
    stack: &mut [Frame],
    styles: &HashMap<String, StyleKind>,
    out: &mut Out,
) -> Result<(), ExtractError> {
    match frame {
        Frame::Para(p) => {
            let text = p.text.trim();
            if text.is_empty() {
                return Ok(());
            }
            match stack.last_mut() {
                Some(Frame::Table(t)) if t.in_cell() => t.add_to_cell(text),
                Some(Frame::Table(_)) => {}
                Some(Frame::Para(outer)) => {
                    if !outer.text.is_empty() && !outer.text.ends_with(char::is_whitespace) {
                        outer.text.push('\n');
                    }
                    outer.text.push_str(text);
                }
                None => {
                    let kind = p.style.as_deref().and_then(|s| {
                        styles
                            .get(s)
                            .copied()
                            .or_else(|| level_of_style_id(s).map(StyleKind::Heading))
                    });
                    let level = outline_level(p.outline).or(match kind {
                        Some(StyleKind::Heading(l)) => Some(l),
                        _ => None,
                    });
                    let list_level = p
                        .list_level
                        .or((kind == Some(StyleKind::ListItem)).then_some(0));
                    if let Some(level) = level {
                        let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
                        out.block(&format!("{} {one_line}", "#".repeat(usize::from(level))))?;
                    } else if let Some(indent) = list_level {
                        let item = text.replace('\n', " ");
                        out.push(Kind::ListItem, &format!("{}- {item}", "  ".repeat(indent)))?;
                    } else {
                        out.block(text)?;
                    }
                }
            }
        }
        Frame::Table(t) => {
            let rows = t.finish();
            match stack.last_mut() {
                Some(Frame::Table(outer)) if outer.in_cell() => {
                    outer.add_to_cell(&table::flatten(&rows))
                }
                Some(Frame::Table(_)) => {}
                Some(Frame::Para(outer)) => {
                    outer.text.push('\n');
                    outer.text.push_str(&table::flatten(&rows));
                }
                None => {
                    if let Some(md) = table::markdown(&rows) {
                        out.block(&md)?;
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn style_names_give_levels() {
        assert_eq!(level_of_style("Title", None), Some(1));
        assert_eq!(level_of_style("heading 2", None), Some(2));
        assert_eq!(level_of_style("Heading 8", None), Some(6));
        assert_eq!(level_of_style("Body Text", Some(2)), Some(3));
        assert_eq!(level_of_style("Body Text", Some(9)), None);
        assert_eq!(level_of_style_id("Heading3"), Some(3));
        assert_eq!(level_of_style_id("Normal"), None);
    }

    const W: &str = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main""#;

    fn run(body: &str, styles: &[(&str, u8)]) -> String {
        let xml = format!(r#"<w:document {W}><w:body>{body}</w:body></w:document>"#);
        let styles = styles
            .iter()
            .map(|(k, v)| (k.to_string(), StyleKind::Heading(*v)))
            .collect();
        render(
            xml.as_bytes(),
            "word/document.xml",
            &styles,
            &Limits::default(),
        )
        .unwrap_or_else(|e| format!("ERR {e}"))
    }

    #[test]
    fn renders_paragraphs_headings_lists_tables() {
        let body = r#"
          <w:p><w:pPr><w:pStyle w:val="Kop1"/></w:pPr><w:r><w:t>Intro</w:t></w:r></w:p>
          <w:p><w:r><w:t xml:space="preserve">Hello </w:t></w:r><w:r><w:t>world &amp; co</w:t></w:r></w:p>
          <w:p><w:pPr><w:numPr><w:ilvl w:val="0"/></w:numPr></w:pPr><w:r><w:t>one</w:t></w:r></w:p>
          <w:p><w:pPr><w:numPr><w:ilvl w:val="1"/></w:numPr></w:pPr><w:r><w:t>two</w:t></w:r></w:p>
          <w:tbl><w:tr><w:tc><w:p><w:r><w:t>A</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>B|C</w:t></w:r></w:p></w:tc></w:tr>
                 <w:tr><w:tc><w:tcPr><w:gridSpan w:val="2"/></w:tcPr><w:p><w:r><w:t>wide</w:t></w:r></w:p></w:tc></w:tr></w:tbl>
          <w:p><w:r><w:delText>gone</w:delText><w:instrText>PAGE</w:instrText><w:t>kept</w:t></w:r></w:p>"#;
        assert_eq!(
            run(body, &[("Kop1", 1)]),
            "# Intro\n\nHello world & co\n\n- one\n  - two\n\n| A | B\\|C |\n| --- | --- |\n| wide |  |\n\nkept"
        );
    }

    #[test]
    fn alternate_content_is_read_once() {
        let body = r#"<w:p xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006">
            <w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:t>box</w:t></mc:Choice>
            <mc:Fallback><w:t>box</w:t></mc:Fallback></mc:AlternateContent></w:r></w:p>"#;
        assert_eq!(run(body, &[]), "box");
    }

    #[test]
    fn malformed_xml_is_corrupt() {
        let xml = format!(r#"<w:document {W}><w:body><w:p></w:body>"#);
        let r = render(
            xml.as_bytes(),
            "word/document.xml",
            &HashMap::new(),
            &Limits::default(),
        );
        assert!(matches!(r, Err(ExtractError::Corrupt(_))));
    }
}
