//! An entity: description, relations out and in, every readable mention with its snippet
//! (each linking to the sentence in its document and version), and an inline SVG of its
//! 1-hop neighbourhood, laid out on a ring without a graph library.

use std::collections::BTreeMap;
use std::f64::consts::PI;

use leptos::prelude::*;
use leptos_router::hooks::{use_navigate, use_params_map};
use leptos_router::NavigateOptions;
use serde::Deserialize;
use serde_json::json;

use crate::api::ApiError;
use crate::components::{count, error_view, loading_view, url_encode, Shell};
use crate::session::Session;

const ENTITY: &str = "query($id: ID!) { entity(id: $id) { id name type description \
relations { id predicate subject { id name type } object { id name type } \
mentions { id version snippet offset document { id title } } } \
mentions { id version snippet offset document { id title } } } }";

/// Neighbours drawn around the entity; the rest are listed below the drawing.
const MAX_DRAWN: usize = 12;

#[derive(Clone, Debug, Deserialize)]
struct EntityData {
    entity: Option<Entity>,
}

#[derive(Clone, Debug, Deserialize)]
struct Entity {
    id: String,
    name: String,
    #[serde(rename = "type")]
    kind: String,
    description: Option<String>,
    relations: Vec<Relation>,
    mentions: Vec<Mention>,
}

#[derive(Clone, Debug, Deserialize)]
struct Relation {
    id: String,
    predicate: String,
    subject: Option<EntityRef>,
    object: Option<EntityRef>,
    mentions: Vec<Mention>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
struct EntityRef {
    id: String,
    name: String,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Clone, Debug, Deserialize)]
struct Mention {
    id: String,
    version: u32,
    snippet: String,
    document: MentionDocument,
}

#[derive(Clone, Debug, Deserialize)]
struct MentionDocument {
    id: String,
    title: String,
}

#[component]
pub fn EntityPage(session: Session) -> impl IntoView {
    view! {
        <Shell session>
            <EntityView session />
        </Shell>
    }
}

#[component]
fn EntityView(session: Session) -> impl IntoView {
    let params = use_params_map();
    let id = Memo::new(move |_| params.read().get("id").unwrap_or_default());
    let entity = LocalResource::new(move || {
        let id = id.get();
        async move { session.gql::<EntityData>(ENTITY, json!({ "id": id })).await }
    });
    let navigate = use_navigate();
    move || match entity.get() {
        None => loading_view(),
        Some(Err(e)) => error_view(&e),
        Some(Ok(EntityData { entity: None })) => error_view(&ApiError::local(
            "No such entity, or nothing you can read mentions it.",
        )),
        Some(Ok(EntityData { entity: Some(e) })) => entity_view(e, navigate.clone()),
    }
}

fn entity_view(e: Entity, navigate: impl Fn(&str, NavigateOptions) + Clone + 'static) -> AnyView {
    let outgoing: Vec<&Relation> = e
        .relations
        .iter()
        .filter(|r| r.subject.as_ref().is_some_and(|s| s.id == e.id))
        .collect();
    let incoming: Vec<&Relation> = e
        .relations
        .iter()
        .filter(|r| r.subject.as_ref().is_none_or(|s| s.id != e.id))
        .collect();
    let relation_list = |rels: &[&Relation], out: bool, list_id: &'static str| {
        if rels.is_empty() {
            return view! { <p class="muted" id=list_id>"None."</p> }.into_any();
        }
        let items = rels
            .iter()
            .map(|r| {
                let other = if out {
                    r.object.clone()
                } else {
                    r.subject.clone()
                };
                let other_view = other.map(|o| {
                    view! { <a class="entity-link" href=format!("/entities/{}", o.id)>{o.name}</a> }
                });
                let predicate = r.predicate.replace('_', " ");
                let sentence = if out {
                    view! { <span class="predicate">{predicate}</span> " " {other_view} }.into_any()
                } else {
                    view! { {other_view} " " <span class="predicate">{predicate}</span> }.into_any()
                };
                let mentions = r.mentions.iter().map(mention_view).collect_view();
                view! {
                    <li class="relation" data-id=r.id.clone()>
                        <div>{sentence}</div>
                        <ul class="mentions compact">{mentions}</ul>
                    </li>
                }
            })
            .collect_view();
        view! { <ul class="relations" id=list_id>{items}</ul> }.into_any()
    };
    let outgoing_view = relation_list(&outgoing, true, "relations-out");
    let incoming_view = relation_list(&incoming, false, "relations-in");
    let graph = neighbourhood_svg(&e, navigate);
    let mentions = e.mentions.iter().map(mention_view).collect_view();
    view! {
        <p class="crumbs"><a href="/knowledge">"Knowledge"</a></p>
        <div class="page-head">
            <h2 id="entity-name" data-id=e.id.clone()>{e.name.clone()}</h2>
            <span class="tag type" id="entity-type">{e.kind.clone()}</span>
        </div>
        {e.description.clone().map(|d| view! { <p id="entity-description">{d}</p> })}
        <div class="entity-layout">
            <section class="card">
                <h3>"Neighbourhood"</h3>
                {graph}
            </section>
            <section class="card">
                <h3>{format!("Relations ({})", e.relations.len())}</h3>
                <h4>"From " {e.name.clone()}</h4>
                {outgoing_view}
                <h4>"To " {e.name.clone()}</h4>
                {incoming_view}
            </section>
        </div>
        <section class="card">
            <h3 id="mentions-heading">{count(e.mentions.len() as u64, "mention")}</h3>
            <ul id="mentions-list" class="mentions">{mentions}</ul>
        </section>
    }
    .into_any()
}

fn mention_view(m: &Mention) -> impl IntoView {
    let href = format!(
        "/documents/{}?version={}&highlight={}",
        m.document.id,
        m.version,
        url_encode(&m.snippet)
    );
    view! {
        <li class="mention" data-id=m.id.clone() data-document=m.document.id.clone()>
            <a class="mention-link" href=href>
                {m.document.title.clone()} <span class="muted">{format!(" v{}", m.version)}</span>
            </a>
            <blockquote class="snippet">{m.snippet.clone()}</blockquote>
        </li>
    }
}

/// One neighbour on the ring: who, and the predicates between it and the centre.
struct Neighbour {
    entity: EntityRef,
    out: Vec<String>,
    inc: Vec<String>,
}

/// The 1-hop neighbourhood as inline SVG: the entity in the centre, its neighbours evenly on
/// an ellipse, one line per neighbour labelled with the predicates (→ out, ← in).
fn neighbourhood_svg(
    e: &Entity,
    navigate: impl Fn(&str, NavigateOptions) + Clone + 'static,
) -> AnyView {
    let mut by_id: BTreeMap<String, Neighbour> = BTreeMap::new();
    for r in &e.relations {
        let (Some(s), Some(o)) = (&r.subject, &r.object) else {
            continue;
        };
        let (other, out) = if s.id == e.id { (o, true) } else { (s, false) };
        if other.id == e.id {
            continue;
        }
        let n = by_id.entry(other.id.clone()).or_insert_with(|| Neighbour {
            entity: other.clone(),
            out: Vec::new(),
            inc: Vec::new(),
        });
        let p = r.predicate.replace('_', " ");
        if out {
            n.out.push(p)
        } else {
            n.inc.push(p)
        }
    }
    if by_id.is_empty() {
        return view! { <p class="muted" id="neighbourhood-empty">"No relations yet."</p> }
            .into_any();
    }
    let total = by_id.len();
    let drawn: Vec<Neighbour> = by_id.into_values().take(MAX_DRAWN).collect();
    let (w, h) = (640.0_f64, 360.0_f64);
    let (cx, cy) = (w / 2.0, h / 2.0);
    let (rx, ry) = (w / 2.0 - 110.0, h / 2.0 - 50.0);
    let n = drawn.len();
    let items = drawn
        .into_iter()
        .enumerate()
        .map(|(i, nb)| {
            // One or two neighbours sit left and right (room for the labels); more start on top.
            let start = if n <= 2 { 0.0 } else { -PI / 2.0 };
            let angle = start + 2.0 * PI * i as f64 / n as f64;
            let (x, y) = (cx + rx * angle.cos(), cy + ry * angle.sin());
            let (mx, my) = ((cx + x) / 2.0, (cy + y) / 2.0);
            let label = [
                (!nb.out.is_empty()).then(|| format!("→ {}", nb.out.join(", "))),
                (!nb.inc.is_empty()).then(|| format!("← {}", nb.inc.join(", "))),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ");
            let href = format!("/entities/{}", nb.entity.id);
            let go = navigate.clone();
            let anchor = if x < cx - 1.0 { "end" } else if x > cx + 1.0 { "start" } else { "middle" };
            let tx = match anchor {
                "end" => x - 10.0,
                "start" => x + 10.0,
                _ => x,
            };
            let ty = if anchor == "middle" { if y < cy { y - 12.0 } else { y + 20.0 } } else { y + 4.0 };
            view! {
                <line class="edge" x1=cx y1=cy x2=x y2=y />
                <text class="edge-label" x=mx y=my - 4.0 text-anchor="middle">{short(&label, 28)}</text>
                <g class="node neighbour" data-id=nb.entity.id.clone() role="link" tabindex="0"
                    on:click=move |_| go(&href, NavigateOptions::default())>
                    <title>{format!("{} ({})", nb.entity.name, nb.entity.kind)}</title>
                    <circle cx=x cy=y r="7" />
                    <text x=tx y=ty text-anchor=anchor>{short(&nb.entity.name, 22)}</text>
                </g>
            }
        })
        .collect_view();
    let more = (total > MAX_DRAWN).then(|| {
        view! { <p class="muted small">{format!("{} more not drawn; all are listed under Relations.", total - MAX_DRAWN)}</p> }
    });
    view! {
        <svg id="neighbourhood" class="graph" viewBox=format!("0 0 {w} {h}") role="img"
            aria-label=format!("{} and its {} neighbours", e.name, total)>
            {items}
            <g class="node centre">
                <circle cx=cx cy=cy r="11" />
                <text x=cx y=cy + 28.0 text-anchor="middle">{short(&e.name, 30)}</text>
            </g>
        </svg>
        {more}
    }
    .into_any()
}

/// At most `max` characters, with an ellipsis when cut.
fn short(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}
