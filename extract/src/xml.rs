//! Small helpers over quick-xml's namespace-aware reader, shared by the DOCX, PPTX and ODS code.

use quick_xml::events::{BytesStart, BytesText, Event};
use quick_xml::name::{Namespace, ResolveResult};
use quick_xml::NsReader;

use crate::ExtractError;

/// Namespace families an element can belong to (transitional and strict OOXML URIs alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ns {
    /// WordprocessingML (`w:`).
    W,
    /// PresentationML (`p:`).
    P,
    /// DrawingML (`a:`).
    A,
    /// Markup compatibility (`mc:`).
    Mc,
    /// Package relationships.
    Rel,
    /// Office document relationships (`r:`).
    R,
    /// Anything else, or none.
    Other,
}

fn classify(ns: &[u8]) -> Ns {
    match ns {
        b"http://schemas.openxmlformats.org/wordprocessingml/2006/main"
        | b"http://purl.oclc.org/ooxml/wordprocessingml/main" => Ns::W,
        b"http://schemas.openxmlformats.org/presentationml/2006/main"
        | b"http://purl.oclc.org/ooxml/presentationml/main" => Ns::P,
        b"http://schemas.openxmlformats.org/drawingml/2006/main"
        | b"http://purl.oclc.org/ooxml/drawingml/main" => Ns::A,
        b"http://schemas.openxmlformats.org/markup-compatibility/2006" => Ns::Mc,
        b"http://schemas.openxmlformats.org/package/2006/relationships" => Ns::Rel,
        b"http://schemas.openxmlformats.org/officeDocument/2006/relationships"
        | b"http://purl.oclc.org/ooxml/officeDocument/relationships" => Ns::R,
        _ => Ns::Other,
    }
}

/// A namespace-resolving reader over an in-memory XML part.
pub(crate) struct Reader<'a> {
    inner: NsReader<&'a [u8]>,
    part: String,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(xml: &'a [u8], part: &str) -> Reader<'a> {
        let mut inner = NsReader::from_reader(xml);
        let config = inner.config_mut();
        config.trim_text(false);
        config.check_end_names = true;
        Reader {
            inner,
            part: part.to_string(),
        }
    }

    /// The next event, with the namespace family of its element (for Start/Empty/End).
    pub(crate) fn next(&mut self) -> Result<(Ns, Event<'a>), ExtractError> {
        let (ns, event) = self
            .inner
            .read_resolved_event()
            .map_err(|e| ExtractError::Corrupt(format!("malformed XML in {}: {e}", self.part)))?;
        let ns = match ns {
            ResolveResult::Bound(Namespace(uri)) => classify(uri),
            _ => Ns::Other,
        };
        Ok((ns, event))
    }

    /// The namespace family of an attribute's name, and its local name.
    pub(crate) fn attr_ns(&self, key: quick_xml::name::QName<'_>) -> Ns {
        match self.inner.resolve_attribute(key).0 {
            ResolveResult::Bound(Namespace(uri)) => classify(uri),
            _ => Ns::Other,
        }
    }

    /// The value of the attribute with local name `local` (any namespace), unescaped.
    pub(crate) fn attr(&self, e: &BytesStart<'_>, local: &[u8]) -> Option<String> {
        e.attributes()
            .flatten()
            .find(|a| a.key.local_name().as_ref() == local)
            .map(|a| match a.unescape_value() {
                Ok(v) => v.into_owned(),
                Err(_) => String::from_utf8_lossy(&a.value).into_owned(),
            })
    }

    /// The value of the attribute `local` in namespace family `ns`.
    pub(crate) fn attr_in(&self, e: &BytesStart<'_>, ns: Ns, local: &[u8]) -> Option<String> {
        e.attributes()
            .flatten()
            .find(|a| a.key.local_name().as_ref() == local && self.attr_ns(a.key) == ns)
            .map(|a| match a.unescape_value() {
                Ok(v) => v.into_owned(),
                Err(_) => String::from_utf8_lossy(&a.value).into_owned(),
            })
    }
}

/// The text of a text event, unescaped (falling back to the raw text on a bad entity).
pub(crate) fn text(t: &BytesText<'_>) -> String {
    match t.unescape() {
        Ok(s) => s.into_owned(),
        Err(_) => String::from_utf8_lossy(t.as_ref()).into_owned(),
    }
}

/// The local name of a start/empty/end element as bytes.
pub(crate) fn local<'b>(name: quick_xml::name::QName<'b>) -> quick_xml::name::LocalName<'b> {
    name.local_name()
}

/// Relationship id → target, read from a `.rels` part.
pub(crate) fn relationships(xml: &[u8], part: &str) -> Result<Vec<Relationship>, ExtractError> {
    let mut r = Reader::new(xml, part);
    let mut rels = Vec::new();
    loop {
        let (ns, ev) = r.next()?;
        match ev {
            Event::Start(ref e) | Event::Empty(ref e)
                if ns == Ns::Rel && local(e.name()).as_ref() == b"Relationship" =>
            {
                let id = r.attr(e, b"Id").unwrap_or_default();
                let target = r.attr(e, b"Target").unwrap_or_default();
                let kind = r.attr(e, b"Type").unwrap_or_default();
                let external = r
                    .attr(e, b"TargetMode")
                    .is_some_and(|m| m.eq_ignore_ascii_case("External"));
                rels.push(Relationship {
                    id,
                    target,
                    kind,
                    external,
                });
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(rels)
}

/// One `<Relationship>` of a `.rels` part.
#[derive(Debug, Clone)]
pub(crate) struct Relationship {
    pub(crate) id: String,
    pub(crate) target: String,
    pub(crate) kind: String,
    pub(crate) external: bool,
}

/// The `.rels` part of `part` (`word/document.xml` → `word/_rels/document.xml.rels`).
pub(crate) fn rels_path(part: &str) -> String {
    match part.rsplit_once('/') {
        Some((dir, file)) => format!("{dir}/_rels/{file}.rels"),
        None => format!("_rels/{part}.rels"),
    }
}

/// The directory of a part (`ppt/slides/slide1.xml` → `ppt/slides`).
pub(crate) fn dir_of(part: &str) -> &str {
    part.rsplit_once('/').map(|(d, _)| d).unwrap_or("")
}
