//! `docs/store-schema.md` shows the one schema file verbatim.

use intentkey::claim::schema::SCHEMA_SQL;

#[test]
fn the_schema_document_quotes_the_schema_file() {
    let doc_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/store-schema.md");
    let doc = std::fs::read_to_string(doc_path).expect("docs/store-schema.md is readable");
    let start = doc
        .find("```sql\n")
        .expect("docs/store-schema.md has a ```sql block")
        + "```sql\n".len();
    let end = start
        + doc[start..]
            .find("```")
            .expect("the ```sql block is closed");
    assert_eq!(
        &doc[start..end],
        SCHEMA_SQL,
        "docs/store-schema.md's ```sql block must be crates/intentkey/schema/intentkey.sql verbatim: copy the file into it"
    );
    let version = format!("version {}", intentkey::claim::schema::SCHEMA_VERSION);
    assert!(
        doc.lines()
            .next()
            .is_some_and(|title| title.contains(&version)),
        "the title names {version}"
    );
}
