//! `#[reel::tool]` and `#[reel::schema]` compiled the way a tool crate
//! compiles them: a crate that depends on `reel` alone (no serde, no
//! schemars) builds its tools with the attributes, and each misuse is
//! refused with a message that names the attribute and says what to
//! write instead (the `.stderr` files are rustc's output, reviewed).

#[test]
fn a_tool_crate_on_reel_alone_compiles_and_misuses_are_refused_naming_the_attribute() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/pass/*.rs");
    cases.compile_fail("tests/fail/*.rs");
}
