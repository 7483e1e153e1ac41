use super::*;
use crate::reply::{validate, Extraction};

const DOC: &str = "Acme Robotics, a maker of warehouse robots, is based in Berlin. \
Jane Doe, CEO of Acme Robotics, spoke on Monday. Acme Robotics acquired Globex Corporation in March.\n\n\
Globex was founded by John Smith in 2004. Acme also partnered with Initech to supply robots. \
Dr. Maria Garcia works at the University of Vienna. Berlin, Germany is home to many startups.";

fn run(text: &str) -> Extraction {
    let raw = Rules::new().reply_json(text);
    match validate(&raw, text) {
        Ok(x) => x,
        Err(r) => panic!("rules output refused: {r}\n{raw}"),
    }
}

fn entity<'a>(x: &'a Extraction, name: &str) -> &'a crate::reply::Entity {
    x.entities
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("no entity {name:?} in {:#?}", names(x)))
}

fn names(x: &Extraction) -> Vec<(String, String)> {
    x.entities
        .iter()
        .map(|e| (e.entity_type.clone(), e.name.clone()))
        .collect()
}

fn triples(x: &Extraction) -> Vec<(String, String, String)> {
    x.relations
        .iter()
        .map(|r| {
            (
                x.entities[r.subject].name.clone(),
                r.predicate.clone(),
                x.entities[r.object].name.clone(),
            )
        })
        .collect()
}

fn has(x: &Extraction, s: &str, p: &str, o: &str) -> bool {
    triples(x).contains(&(s.to_string(), p.to_string(), o.to_string()))
}

#[test]
fn finds_typed_entities() {
    let x = run(DOC);
    let want = [
        ("organization", "Acme Robotics"),
        ("place", "Berlin"),
        ("person", "Jane Doe"),
        ("organization", "Globex Corporation"),
        ("person", "John Smith"),
        ("person", "Maria Garcia"),
        ("organization", "University of Vienna"),
        ("place", "Germany"),
    ];
    for (t, n) in want {
        assert_eq!(entity(&x, n).entity_type, t, "{n}");
    }
    // Aliases ("Acme", "Globex") are mentions of the full names, not entities of their own.
    assert!(
        x.entities
            .iter()
            .all(|e| e.name != "Acme" && e.name != "Globex"),
        "{:?}",
        names(&x)
    );
    assert!(x
        .entities
        .iter()
        .all(|e| e.name != "Monday" && e.name != "Dr"));
    let acme = entity(&x, "Acme Robotics");
    assert_eq!(acme.description, "a maker of warehouse robots");
    assert_eq!(acme.mentions.len(), 4, "{:?}", acme.mentions);
    assert!(entity(&x, "Initech").entity_type == "concept");
}

#[test]
fn finds_relations() {
    let x = run(DOC);
    for (s, p, o) in [
        ("Acme Robotics", "located_in", "Berlin"),
        ("Jane Doe", "leads", "Acme Robotics"),
        ("Acme Robotics", "acquired", "Globex Corporation"),
        ("Globex Corporation", "founded_by", "John Smith"),
        ("Acme Robotics", "partner_of", "Initech"),
        ("Maria Garcia", "works_at", "University of Vienna"),
        ("Berlin", "located_in", "Germany"),
    ] {
        assert!(
            has(&x, s, p, o),
            "missing {s} {p} {o} in {:#?}",
            triples(&x)
        );
    }
    assert_eq!(x.relations.len(), 7, "{:#?}", triples(&x));
    // Every relation's snippet is its sentence.
    let r = &x.relations[0];
    assert_eq!(
        r.mentions[0].snippet,
        "Acme Robotics, a maker of warehouse robots, is based in Berlin."
    );
    assert_eq!(r.mentions[0].char_offset, 0);
}

#[test]
fn more_patterns() {
    let text = "Acme Robotics CEO Jane Doe opened the event. Initech, a subsidiary of Globex Corp, \
                builds sensors. Peter Novak joined Initech in 2021. Globex Corp launched Hyperlift. \
                The deal makes Acme Robotics a customer of Initech. Umbrella Group is owned by Globex Corp. \
                Sarah Connor, the founder of Cyberdyne Systems, lives in Los Angeles. \
                A partnership between Acme Robotics and Umbrella Group was announced. \
                Hyperlift relies on Kubernetes.";
    let x = run(text);
    for (s, p, o) in [
        ("Jane Doe", "leads", "Acme Robotics"),
        ("Initech", "part_of", "Globex Corp"),
        ("Peter Novak", "works_at", "Initech"),
        ("Globex Corp", "produces", "Hyperlift"),
        ("Acme Robotics", "customer_of", "Initech"),
        ("Globex Corp", "owns", "Umbrella Group"),
        ("Cyberdyne Systems", "founded_by", "Sarah Connor"),
        ("Acme Robotics", "partner_of", "Umbrella Group"),
        ("Hyperlift", "depends_on", "Kubernetes"),
    ] {
        assert!(
            has(&x, s, p, o),
            "missing {s} {p} {o} in {:#?}",
            triples(&x)
        );
    }
    assert_eq!(entity(&x, "Hyperlift").entity_type, "product");
    assert_eq!(entity(&x, "Los Angeles").entity_type, "place");
    assert_eq!(entity(&x, "Peter Novak").entity_type, "person");
}

#[test]
fn organization_suffixes_and_connectors() {
    let x = run(
        "Shares of Procter & Gamble rose. Analysts at Bank of America and Deutsche Bank AG \
                 disagreed with Acme Robotics, Inc. about it.",
    );
    assert_eq!(entity(&x, "Procter & Gamble").entity_type, "concept");
    assert_eq!(entity(&x, "Bank of America").entity_type, "organization");
    assert_eq!(entity(&x, "Deutsche Bank AG").entity_type, "organization");
    assert_eq!(entity(&x, "Acme Robotics, Inc.").name_norm, "acme robotics");
    // "Shares" opens a sentence and is not a name.
    assert!(x.entities.iter().all(|e| e.name != "Shares"));
}

#[test]
fn no_false_relations_between_lists() {
    let x =
        run("Acme Robotics and Globex Corporation met in Paris. Jane Doe said Initech was late.");
    assert!(x.relations.is_empty(), "{:#?}", triples(&x));
}

#[test]
fn output_always_validates() {
    let long_sentence = format!(
        "Acme Robotics {} acquired Globex Corporation {} and nothing else",
        "very ".repeat(60),
        "really ".repeat(80)
    );
    let texts = [
        String::new(),
        "   \n\n  ".to_string(),
        "no capitals at all here.".to_string(),
        "Zürich-based Über Straße GmbH hired Åsa Öberg. «Ça va», dit Jean Dupont à Genève."
            .to_string(),
        "\"Acme\" (Acme Robotics) — Acme's CEO... Dr. . Mr Inc. & & of The".to_string(),
        "日本 Tokyo 東京 Sony Group Corporation is based in Tokyo.".to_string(),
        long_sentence,
        DOC.repeat(3),
        "A.B.C. D.E. F. G. H.I.J.K.L.M.N.O.P.".to_string(),
        "Line one\nLine Two\n- Bullet Acme\n1. Item Globex\n# Heading Initech".to_string(),
    ];
    for t in &texts {
        let x = run(t);
        for e in &x.entities {
            for m in &e.mentions {
                assert!(t.contains(&m.snippet));
                assert!(m.snippet.len() <= MAX_SNIPPET + 10, "{}", m.snippet.len());
            }
        }
    }
}

#[test]
fn long_sentences_give_windows() {
    let t = format!(
        "Acme Robotics {} acquired Globex Corporation {} end",
        "very ".repeat(20),
        "really ".repeat(120)
    );
    let x = run(&t);
    assert!(has(&x, "Acme Robotics", "acquired", "Globex Corporation") || x.relations.is_empty());
    for e in &x.entities {
        assert!(e.mentions[0].snippet.len() < t.len());
    }
}

#[test]
fn deterministic() {
    let a = Rules::new().reply_json(DOC);
    for _ in 0..3 {
        assert_eq!(Rules::new().reply_json(DOC), a);
    }
}

#[tokio::test]
async fn goes_through_extract() {
    let out = crate::extract(&Rules::new(), DOC).await.unwrap();
    assert_eq!(out.attempts, 1);
    assert!(out.refusals.is_empty());
    assert!(out.extraction.entities.len() >= 8);
}

/// ~200 generated paragraphs; prints documents/s (never asserts a time).
#[test]
fn throughput() {
    let docs = generated_paragraphs(200);
    let rules = Rules::new();
    let start = std::time::Instant::now();
    let mut entities = 0;
    let mut relations = 0;
    for d in &docs {
        let x = validate(&rules.reply_json(d), d).unwrap();
        entities += x.entities.len();
        relations += x.relations.len();
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "rules: {} documents in {:.3}s = {:.0} documents/s ({} entities, {} relations)",
        docs.len(),
        secs,
        docs.len() as f64 / secs,
        entities,
        relations
    );
    assert!(entities > docs.len() && relations > docs.len());

    // Documents at the 12k cap.
    let big: Vec<String> = (0..10)
        .map(|i| {
            let mut d = generated_paragraphs(40)[i..].join("\n\n");
            d.truncate(crate::MAX_CHARS);
            crate::cap_text(&d).to_string()
        })
        .collect();
    let start = std::time::Instant::now();
    for d in &big {
        validate(&rules.reply_json(d), d).unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "rules: {} documents of ~12k characters in {:.3}s = {:.1} documents/s",
        big.len(),
        secs,
        big.len() as f64 / secs
    );
}

/// Deterministic synthetic paragraphs (~600 characters each) built from templates.
pub(crate) fn generated_paragraphs(n: usize) -> Vec<String> {
    let orgs = [
        "Acme Robotics",
        "Globex Corporation",
        "Initech Systems",
        "Umbrella Group",
        "Stark Industries",
        "Wayne Enterprises",
        "Hooli Labs",
        "Vandelay Industries",
    ];
    let people = [
        "Jane Doe",
        "John Smith",
        "Maria Garcia",
        "Peter Novak",
        "Anna Schmidt",
        "David Chen",
    ];
    let places = ["Berlin", "London", "Tokyo", "Toronto", "Madrid", "Sydney"];
    let products = ["Hyperlift", "Skybridge", "Quanta", "Nimbus"];
    (0..n)
        .map(|i| {
            let o1 = orgs[i % orgs.len()];
            let o2 = orgs[(i * 3 + 1) % orgs.len()];
            let p = people[i % people.len()];
            let p2 = people[(i + 2) % people.len()];
            let pl = places[i % places.len()];
            let pr = products[i % products.len()];
            let o2 = if o1 == o2 {
                orgs[(i + 1) % orgs.len()]
            } else {
                o2
            };
            format!(
                "{o1}, a company founded in {year}, is headquartered in {pl}. {p}, CEO of {o1}, \
                 said on Tuesday that revenue grew {g} percent. Last year {o1} acquired {o2} for \
                 an undisclosed sum. {p2} works at {o2} as an engineer. The group launched \
                 {pr} in {pl}. {o2} partnered with {o1} to ship {pr} worldwide; analysts expect \
                 more deals. Customers in {pl} can order it today, the company said in a \
                 statement published on its website.",
                year = 1990 + i % 30,
                g = 3 + i % 17,
            )
        })
        .collect()
}
