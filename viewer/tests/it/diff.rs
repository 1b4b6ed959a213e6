//! The alignment `reel diff` and the console's `/compare` share
//! (`reel_viewer::diff`): properties over generated runs.

use proptest::prelude::*;
use reel_core::fact::{FactKind, Random};
use reel_core::strategy::facts_of_run;
use reel_core::Fact;
use reel_viewer::diff::{align, first_difference};

/// `facts` as another run: run id `b`, every time moved.
fn elsewhere(facts: &[Fact]) -> Vec<Fact> {
    facts
        .iter()
        .map(|f| {
            let mut f = f.clone();
            f.at = f.at.wrapping_add(987_654_321);
            f.offset = f.offset.wrapping_mul(3);
            if let FactKind::RunStarted(r) = &mut f.kind {
                r.run_id = "b".into();
            }
            f
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_run_matches_itself_recorded_again(facts in facts_of_run("a")) {
        let again = elsewhere(&facts);
        let rows = align(&facts, &again);
        prop_assert_eq!(rows.len(), facts.len());
        prop_assert_eq!(first_difference(&rows), None, "{:?}", rows);
    }

    #[test]
    fn the_first_difference_is_where_the_runs_part(
        facts in facts_of_run("a"),
        at in any::<prop::sample::Index>(),
        cut in any::<bool>(),
    ) {
        let mut other = elsewhere(&facts);
        let k = at.index(facts.len());
        if cut {
            other.truncate(k);
        } else {
            // A fact of a kind no generated run has at k (a random draw
            // never equals the value of a fact of another kind).
            other[k].kind = FactKind::Random(Random { value: 7 });
            if let FactKind::Random(r) = &facts[k].kind {
                prop_assume!(r.value != 7);
            }
        }
        let rows = align(&facts, &other);
        prop_assert_eq!(rows.len(), facts.len().max(other.len()));
        prop_assert_eq!(first_difference(&rows), Some(k));
        prop_assert!(rows[..k].iter().all(Vec::is_empty));
    }
}
