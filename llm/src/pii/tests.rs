use super::*;

fn anon() -> Anonymizer {
    Anonymizer::new(vec![
        "Jean Dupont".into(),
        "Jean".into(),
        "Marie Curie".into(),
    ])
    .unwrap()
}

#[test]
fn anonymizes_every_kind_with_stable_numbering() {
    let text = "Jean Dupont (jean@dupont.fr, +33 6 12 34 56 78) pays Marie Curie \
                from DE89 3704 0044 0532 0130 00; ask Jean at jean@dupont.fr.";
    let (out, map) = anon().anonymize(text);
    assert_eq!(
        out,
        "[NAME_1] ([EMAIL_1], [PHONE_1]) pays [NAME_2] from [IBAN_1]; ask [NAME_3] at [EMAIL_1]."
    );
    assert_eq!(map.len(), 6);
    for original in map.originals() {
        assert!(!out.contains(original), "{original} leaked");
    }
    assert_eq!(map.original("[NAME_1]"), Some("Jean Dupont"));
    assert_eq!(map.original("PHONE_1"), Some("+33 6 12 34 56 78"));
    assert_eq!(map.original("[NAME_9]"), None);
    assert_eq!(map.restore(&out), text);
}

#[test]
fn same_value_in_other_forms_gets_the_same_placeholder() {
    let (out, map) = anon().anonymize(
        "JEAN DUPONT, jean  dupont; Jean@Dupont.FR jean@dupont.fr; \
         +33 6 12 34 56 78 = +33612345678 = 0033 6 12 34 56 78; \
         gb29 nwbk 6016 1331 9268 19 = GB29NWBK60161331926819",
    );
    assert_eq!(
        out,
        "[NAME_1], [NAME_1]; [EMAIL_1] [EMAIL_1]; [PHONE_1] = [PHONE_1] = [PHONE_1]; \
         [IBAN_1] = [IBAN_1]"
    );
    assert_eq!(map.len(), 4);
    // The first form seen is the one restored.
    assert_eq!(map.restore("[NAME_1]"), "JEAN DUPONT");
    assert_eq!(map.restore("[PHONE_1]"), "+33 6 12 34 56 78");
    // Every form is listed, so a test can check none leaked.
    assert_eq!(map.originals().count(), 9);
}

#[test]
fn text_without_pii_is_unchanged() {
    for text in [
        "",
        "The 2024 report, published 2024-01-15, covers 12 sites and 1,234,567 EUR.",
        "Version 1.2.3 runs on 10.0.0.1 since 15.01.2024; ISBN 978-3-16-148410-0.",
        "Jeanne and Jeannot met at 9.00-17.00, room 0012 3456, ticket #1234567.",
        "Placeholders look like [NAME_1] but the map is empty.",
    ] {
        let (out, map) = anon().anonymize(text);
        assert_eq!(out, text);
        assert!(
            map.is_empty(),
            "{text}: {:?}",
            map.placeholders().collect::<Vec<_>>()
        );
        assert_eq!(map.restore(text), text);
    }
}

#[test]
fn restore_tolerates_what_models_do_to_placeholders() {
    let (_, map) = anon().anonymize("Jean Dupont, jean@dupont.fr");
    assert_eq!(
        map.restore("[NAME_1] / [ NAME_1 ] / \\[NAME_1\\] / NAME_1 / NAME_1's mail is EMAIL_1."),
        "Jean Dupont / Jean Dupont / Jean Dupont / Jean Dupont / Jean Dupont's mail is jean@dupont.fr."
    );
    // Unknown or partial placeholders stay as they are.
    assert_eq!(
        map.restore("[NAME_2] NAME_12 MY_NAME_1 NAME_1x [name_1] [IBAN_1]"),
        "[NAME_2] NAME_12 MY_NAME_1 NAME_1x [name_1] [IBAN_1]"
    );
}

#[test]
fn restore_does_not_re_expand_restored_text() {
    // An original that itself looks like a placeholder is restored once, literally.
    let a = Anonymizer::new(vec!["NAME_2 Jones".into(), "Bob".into()]).unwrap();
    let (out, map) = a.anonymize("NAME_2 Jones and Bob");
    assert_eq!(out, "[NAME_1] and [NAME_2]");
    assert_eq!(map.restore(&out), "NAME_2 Jones and Bob");
}

#[test]
fn apply_hides_the_question_pii_in_context() {
    let a = anon();
    let (_, map) = a.anonymize("What did Jean Dupont (+33 6 12 34 56 78) sign?");
    let context = "Contract signed by JEAN DUPONT, tel. 06 12 34 56 78 or +33612345678; \
                   witness Marie Curie, marie@curie.fr. Jean-Dupont-Street.";
    let out = map.apply(context);
    assert_eq!(
        out,
        "Contract signed by [NAME_1], tel. 06 12 34 56 78 or [PHONE_1]; \
         witness Marie Curie, marie@curie.fr. Jean-Dupont-Street."
    );
    // Values the map does not know are left to anonymize_into.
    let mut map = map;
    let out = a.anonymize_into(context, &mut map);
    assert_eq!(
        out,
        "Contract signed by [NAME_1], tel. [PHONE_2] or [PHONE_1]; \
         witness [NAME_2], [EMAIL_1]. [NAME_3]-Dupont-Street."
    );
    assert_eq!(
        map.restore("[NAME_2] <[EMAIL_1]>"),
        "Marie Curie <marie@curie.fr>"
    );
}

#[test]
fn apply_matches_known_values_case_insensitively_as_whole_words() {
    let a = Anonymizer::new(vec![]).unwrap();
    let (_, map) = a.anonymize("mail x.y@z.org");
    assert_eq!(
        map.apply("X.Y@Z.ORG and ax.y@z.org"),
        "[EMAIL_1] and ax.y@z.org"
    );
    assert_eq!(map.apply("nothing here"), "nothing here");
    let empty = a.new_map();
    assert_eq!(empty.apply("x.y@z.org"), "x.y@z.org");
}

#[test]
fn apply_then_restore_round_trips() {
    let a = anon();
    let (question, map) = a.anonymize("Is jean@dupont.fr Jean's address?");
    assert_eq!(question, "Is [EMAIL_1] [NAME_1]'s address?");
    let context = map.apply("Jean wrote from jean@dupont.fr.");
    assert_eq!(context, "[NAME_1] wrote from [EMAIL_1].");
    assert_eq!(map.restore(&context), "Jean wrote from jean@dupont.fr.");
}

#[test]
fn numbering_is_per_kind_and_continues_across_calls() {
    let a = anon();
    let mut map = a.new_map();
    assert_eq!(
        a.anonymize_into("a@b.io c@d.io Jean", &mut map),
        "[EMAIL_1] [EMAIL_2] [NAME_1]"
    );
    assert_eq!(
        a.anonymize_into("Marie Curie e@f.io a@b.io", &mut map),
        "[NAME_2] [EMAIL_3] [EMAIL_1]"
    );
    let listed: Vec<(&str, PiiKind, &str)> = map.placeholders().collect();
    assert_eq!(
        listed,
        vec![
            ("[EMAIL_1]", PiiKind::Email, "a@b.io"),
            ("[EMAIL_2]", PiiKind::Email, "c@d.io"),
            ("[NAME_1]", PiiKind::Name, "Jean"),
            ("[NAME_2]", PiiKind::Name, "Marie Curie"),
            ("[EMAIL_3]", PiiKind::Email, "e@f.io"),
        ]
    );
}

#[test]
fn no_names_configured_still_finds_the_rest() {
    let a = Anonymizer::new(Vec::new()).unwrap();
    let (out, map) = a.anonymize("Jean Dupont, 06 12 34 56 78, NL91 ABNA 0417 1643 00");
    assert_eq!(out, "Jean Dupont, [PHONE_1], [IBAN_1]");
    assert_eq!(map.len(), 2);
}

#[test]
fn debug_prints_no_originals() {
    let a = anon();
    let (_, map) = a.anonymize("Jean Dupont jean@dupont.fr");
    let shown = format!("{map:?} {a:?}");
    assert!(!shown.contains("Jean"), "{shown}");
    assert!(!shown.contains("dupont"), "{shown}");
}

#[test]
fn unicode_text_keeps_its_bytes() {
    let a = Anonymizer::new(vec!["Élodie Müller".into()]).unwrap();
    let text = "Grüße an ÉLODIE MÜLLER — ☎ +49 30 123456 — 🎉 ok";
    let (out, map) = a.anonymize(text);
    assert_eq!(out, "Grüße an [NAME_1] — ☎ [PHONE_1] — 🎉 ok");
    assert_eq!(map.restore(&out), text);
}

#[test]
fn large_name_lists_compile() {
    let names: Vec<String> = (0..5000).map(|i| format!("Person{i} Surname{i}")).collect();
    let a = Anonymizer::new(names).unwrap();
    let (out, _) = a.anonymize("person4999 SURNAME4999 and Person12 Surname12 and Person1");
    assert_eq!(out, "[NAME_1] and [NAME_2] and Person1");
}
