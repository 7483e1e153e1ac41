//! PPTX: slides in presentation order, each opened by `## Slide N: <title>`, followed by the
//! text of its shapes (in the slide's shape-tree order), its tables as Markdown, and its
//! speaker notes as a `Notes: ` paragraph.

use quick_xml::events::Event;

use crate::guard::{resolve_part, Out, ZipReader};
use crate::table::{self, TableBuilder};
use crate::xml::{self, local, Ns, Reader};
use crate::{ExtractError, Limits};

pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<String, ExtractError> {
    let mut zip = ZipReader::new(bytes, limits)?;
    let presentation = main_part(&mut zip)?;
    let slides = slide_parts(&mut zip, &presentation)?;
    let mut out = Out::new(limits);
    for (i, part) in slides.iter().enumerate() {
        let Some(xml_bytes) = zip.read(part)? else {
            continue;
        };
        let slide = parse(&xml_bytes, part)?;
        let n = i + 1;
        match slide.title() {
            Some(title) => out.block(&format!("## Slide {n}: {title}"))?,
            None => out.block(&format!("## Slide {n}"))?,
        }
        for block in slide.content() {
            out.block(block)?;
        }
        if let Some(notes_part) = related(&mut zip, part, "/notesSlide")? {
            if let Some(xml_bytes) = zip.read(&notes_part)? {
                let notes = parse(&xml_bytes, &notes_part)?;
                let text = notes.notes();
                if !text.is_empty() {
                    out.block(&format!("Notes: {text}"))?;
                }
            }
        }
    }
    Ok(out.finish())
}

fn main_part(zip: &mut ZipReader<'_>) -> Result<String, ExtractError> {
    if let Some(rels) = zip.read("_rels/.rels")? {
        for rel in xml::relationships(&rels, "_rels/.rels")? {
            if rel.kind.ends_with("/officeDocument") && !rel.external {
                return Ok(resolve_part("", &rel.target));
            }
        }
    }
    Ok("ppt/presentation.xml".to_string())
}

/// The first part related to `part` by a relationship whose type ends with `kind`.
fn related(
    zip: &mut ZipReader<'_>,
    part: &str,
    kind: &str,
) -> Result<Option<String>, ExtractError> {
    let rels_path = xml::rels_path(part);
    let Some(rels) = zip.read(&rels_path)? else {
        return Ok(None);
    };
    Ok(xml::relationships(&rels, &rels_path)?
        .into_iter()
        .find(|r| r.kind.ends_with(kind) && !r.external)
        .map(|r| resolve_part(xml::dir_of(part), &r.target)))
}

/// Slide parts in presentation order (`p:sldIdLst`), falling back to `ppt/slides/slideN.xml`
/// in numeric order when the presentation part does not list them.
fn slide_parts(zip: &mut ZipReader<'_>, presentation: &str) -> Result<Vec<String>, ExtractError> {
    let mut ids = Vec::new();
    if let Some(xml_bytes) = zip.read(presentation)? {
        let mut r = Reader::new(&xml_bytes, presentation);
        loop {
            let (ns, ev) = r.next()?;
            match ev {
                Event::Start(ref e) | Event::Empty(ref e)
                    if ns == Ns::P && local(e.name()).as_ref() == b"sldId" =>
                {
                    if let Some(id) = r.attr_in(e, Ns::R, b"id") {
                        ids.push(id);
                    }
                }
                Event::Eof => break,
                _ => {}
            }
        }
    }
    let rels_path = xml::rels_path(presentation);
    let rels = match zip.read(&rels_path)? {
        Some(bytes) => xml::relationships(&bytes, &rels_path)?,
        None => Vec::new(),
    };
    let base = xml::dir_of(presentation);
    let mut parts: Vec<String> = ids
        .iter()
        .filter_map(|id| rels.iter().find(|r| &r.id == id && !r.external))
        .map(|r| resolve_part(base, &r.target))
        .collect();
    if parts.is_empty() {
        let mut numbered: Vec<(u32, String)> = zip
            .names()
            .into_iter()
            .filter_map(|n| {
                let num = n
                    .strip_prefix("ppt/slides/slide")?
                    .strip_suffix(".xml")?
                    .parse()
                    .ok()?;
                Some((num, n))
            })
            .collect();
        numbered.sort();
        parts = numbered.into_iter().map(|(_, n)| n).collect();
    }
    Ok(parts)
}

/// A shape's text and, if it is a placeholder, the placeholder's type.
#[derive(Debug, Default)]
struct Shape {
    placeholder: Option<String>,
    paras: Vec<String>,
}

#[derive(Debug)]
enum Block {
    Shape(Shape),
    Table(String),
}

#[derive(Debug, Default)]
struct Slide {
    blocks: Vec<Block>,
}

fn is_title(ph: Option<&str>) -> bool {
    matches!(ph, Some("title" | "ctrTitle"))
}

/// Placeholders that carry furniture, not content: date, footer, header, slide number, the
/// slide image on a notes page.
fn is_furniture(ph: Option<&str>) -> bool {
    matches!(ph, Some("dt" | "ftr" | "hdr" | "sldNum" | "sldImg"))
}

impl Slide {
    fn title(&self) -> Option<String> {
        self.blocks.iter().find_map(|b| match b {
            Block::Shape(s) if is_title(s.placeholder.as_deref()) => {
                let t = one_line(&s.paras.join(" "));
                (!t.is_empty()).then_some(t)
            }
            _ => None,
        })
    }

    fn content(&self) -> Vec<&str> {
        let mut title_seen = false;
        let mut blocks = Vec::new();
        for b in &self.blocks {
            match b {
                Block::Shape(s) => {
                    let ph = s.placeholder.as_deref();
                    if is_title(ph) && !title_seen {
                        title_seen = true;
                        continue;
                    }
                    if is_furniture(ph) {
                        continue;
                    }
                    blocks.extend(s.paras.iter().map(String::as_str));
                }
                Block::Table(t) => blocks.push(t.as_str()),
            }
        }
        blocks
    }

    /// The text of a notes page: its body placeholders.
    fn notes(&self) -> String {
        let mut parts = Vec::new();
        for b in &self.blocks {
            if let Block::Shape(s) = b {
                if s.placeholder.as_deref() == Some("body") {
                    parts.extend(s.paras.iter().map(|p| p.trim()).filter(|p| !p.is_empty()));
                }
            }
        }
        parts.join(" ")
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

enum Frame {
    Shape(Shape),
    Table(TableBuilder),
    Para(String),
}

fn parse(xml_bytes: &[u8], part: &str) -> Result<Slide, ExtractError> {
    let mut r = Reader::new(xml_bytes, part);
    let mut slide = Slide::default();
    let mut stack: Vec<Frame> = Vec::new();
    let mut skip = 0usize;
    let mut in_t = false;
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
            Event::Start(ref e) | Event::Empty(ref e) => {
                let empty = matches!(ev, Event::Empty(_));
                let name = local(e.name());
                let name = name.as_ref();
                match (ns, name) {
                    (Ns::Mc, b"Fallback") if !empty => skip = 1,
                    (Ns::P, b"sp") if !empty => stack.push(Frame::Shape(Shape::default())),
                    (Ns::P, b"ph") => {
                        if let Some(Frame::Shape(s)) = stack.last_mut() {
                            s.placeholder =
                                Some(r.attr(e, b"type").unwrap_or_else(|| "body".to_string()));
                        }
                    }
                    (Ns::A, b"tbl") if !empty => stack.push(Frame::Table(TableBuilder::default())),
                    (Ns::A, b"tr") if !empty => {
                        if let Some(Frame::Table(t)) = stack.last_mut() {
                            t.start_row();
                        }
                    }
                    (Ns::A, b"tc") => {
                        if let Some(Frame::Table(t)) = stack.last_mut() {
                            t.start_cell();
                            if empty {
                                t.end_cell();
                            }
                        }
                    }
                    (Ns::A, b"p") if !empty => stack.push(Frame::Para(String::new())),
                    (Ns::A, b"t") if !empty => in_t = true,
                    (Ns::A, b"br") => {
                        if let Some(Frame::Para(p)) = stack.last_mut() {
                            p.push('\n');
                        }
                    }
                    _ => {}
                }
            }
            Event::End(ref e) => {
                let name = local(e.name());
                match (ns, name.as_ref()) {
                    (Ns::A, b"t") => in_t = false,
                    (Ns::A, b"p") => {
                        if let Some(Frame::Para(text)) = stack.last() {
                            let text = text.trim().to_string();
                            stack.pop();
                            deliver_para(text, &mut stack);
                        }
                    }
                    (Ns::A, b"tr") => {
                        if let Some(Frame::Table(t)) = stack.last_mut() {
                            t.end_row();
                        }
                    }
                    (Ns::A, b"tc") => {
                        if let Some(Frame::Table(t)) = stack.last_mut() {
                            t.end_cell();
                        }
                    }
                    (Ns::A, b"tbl") => {
                        if matches!(stack.last(), Some(Frame::Table(_))) {
                            if let Some(Frame::Table(t)) = stack.pop() {
                                deliver_table(t.finish(), &mut stack, &mut slide);
                            }
                        }
                    }
                    (Ns::P, b"sp") => {
                        if matches!(stack.last(), Some(Frame::Shape(_))) {
                            if let Some(Frame::Shape(s)) = stack.pop() {
                                slide.blocks.push(Block::Shape(s));
                            }
                        }
                    }
                    _ => {}
                }
            }
            Event::Text(ref t) if in_t => {
                if let Some(Frame::Para(p)) = stack.last_mut() {
                    p.push_str(&xml::text(t));
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(slide)
}

fn deliver_para(text: String, stack: &mut [Frame]) {
    if text.is_empty() {
        return;
    }
    match stack.last_mut() {
        Some(Frame::Table(t)) => t.add_to_cell(&text),
        Some(Frame::Shape(s)) => s.paras.push(text),
        Some(Frame::Para(p)) => {
            p.push(' ');
            p.push_str(&text);
        }
        None => {}
    }
}

fn deliver_table(rows: Vec<Vec<String>>, stack: &mut [Frame], slide: &mut Slide) {
    match stack.last_mut() {
        Some(Frame::Table(t)) => t.add_to_cell(&table::flatten(&rows)),
        Some(Frame::Shape(s)) => s.paras.push(table::flatten(&rows)),
        Some(Frame::Para(p)) => p.push_str(&table::flatten(&rows)),
        None => {
            if let Some(md) = table::markdown(&rows) {
                slide.blocks.push(Block::Table(md));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: &str = r#"xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main""#;

    #[test]
    fn reads_title_body_and_table() {
        let xml = format!(
            r#"<p:sld {NS}><p:cSld><p:spTree>
            <p:sp><p:nvSpPr><p:nvPr><p:ph type="title"/></p:nvPr></p:nvSpPr>
              <p:txBody><a:p><a:r><a:t>Plan</a:t></a:r><a:br/><a:r><a:t>2025</a:t></a:r></a:p></p:txBody></p:sp>
            <p:sp><p:nvSpPr><p:nvPr><p:ph idx="1"/></p:nvPr></p:nvSpPr>
              <p:txBody><a:p><a:r><a:t>First</a:t></a:r></a:p><a:p><a:r><a:t>Second</a:t></a:r></a:p></p:txBody></p:sp>
            <p:sp><p:nvSpPr><p:nvPr><p:ph type="sldNum"/></p:nvPr></p:nvSpPr>
              <p:txBody><a:p><a:fld><a:t>7</a:t></a:fld></a:p></p:txBody></p:sp>
            <p:graphicFrame><a:graphic><a:graphicData><a:tbl>
              <a:tr><a:tc><a:txBody><a:p><a:r><a:t>K</a:t></a:r></a:p></a:txBody></a:tc><a:tc><a:txBody><a:p><a:r><a:t>V</a:t></a:r></a:p></a:txBody></a:tc></a:tr>
              <a:tr><a:tc><a:txBody><a:p><a:r><a:t>x</a:t></a:r></a:p></a:txBody></a:tc><a:tc/></a:tr>
            </a:tbl></a:graphicData></a:graphic></p:graphicFrame>
            </p:spTree></p:cSld></p:sld>"#
        );
        let slide = parse(xml.as_bytes(), "ppt/slides/slide1.xml").unwrap_or_default();
        assert_eq!(slide.title().as_deref(), Some("Plan 2025"));
        assert_eq!(
            slide.content(),
            vec!["First", "Second", "| K | V |\n| --- | --- |\n| x |  |"]
        );
    }
}
