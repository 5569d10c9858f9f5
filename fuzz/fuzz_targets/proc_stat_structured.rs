#![no_main]

// The invariants are shared with tests/fuzz_regressions.rs, which replays
// fuzz/seeds/ and fuzz/regressions/ through them on stable Rust.
#[path = "../../tests/fuzz_checks/mod.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::proc_stat_structured(data));
