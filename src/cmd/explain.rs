//! `gpuspy explain`: a rule's documentation, the list of rules, or the README's rule table.

use crate::analysis::rules;
use anyhow::{bail, Result};

pub fn explain(id: Option<&str>, markdown_table: bool) -> Result<()> {
    if markdown_table {
        print!("{}", rule_table());
        return Ok(());
    }
    match id {
        None => {
            for rule in rules::ALL {
                println!(
                    "{:<20} {:<10} {}",
                    rule.id(),
                    rule.layer().name(),
                    summary(rule.doc())
                );
            }
        }
        Some(id) => {
            let Some(rule) = rules::find(id) else {
                let ids: Vec<&str> = rules::ALL.iter().map(|r| r.id()).collect();
                if let Some(known) = crate::did_you_mean::closest(id, ids.iter().copied()) {
                    bail!("no rule named {id}; did you mean {known}? (`gpuspy explain` lists the rules)");
                }
                bail!("no rule named {id}; rules: {}", ids.join(", "));
            };
            println!(
                "{} (layer: {})\n\n{}",
                rule.id(),
                rule.layer().name(),
                rule.doc()
            );
        }
    }
    Ok(())
}

fn summary(doc: &str) -> &str {
    doc.lines().next().unwrap_or_default()
}

/// The table between the `rules` markers in README.md; a test keeps the two identical.
pub fn rule_table() -> String {
    let mut out = String::from("| rule | layer | what it finds |\n|---|---|---|\n");
    for rule in rules::ALL {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            rule.id(),
            rule.layer().name(),
            summary(rule.doc())
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readme_rule_table_is_generated_from_the_rule_docs() {
        let readme = include_str!("../../README.md");
        let start = readme.find("<!-- rules:begin -->\n").expect("begin marker") + 21;
        let end = readme.find("<!-- rules:end -->").expect("end marker");
        assert_eq!(
            &readme[start..end],
            rule_table(),
            "README.md's rule table is stale: replace it with `gpuspy explain --markdown-table`"
        );
    }
}
