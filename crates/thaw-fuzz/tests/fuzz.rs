//! Each fuzz target under bolero. Under `cargo test` (stable) bolero feeds it
//! random inputs for `BOLERO_RANDOM_TEST_TIME_MS` (1 s by default; `make test`
//! runs that) and reports how many (`-- --nocapture`), after the inputs under
//! `tests/__fuzz__/<test>/corpus` and `.../crashes` (a regression input for
//! every bug found, replayed on every run). `scripts/fuzz.sh` runs longer;
//! `cargo bolero test` is to run the same tests under libFuzzer (not linking here yet).

macro_rules! fuzz {
    ($name:ident, $target:path) => {
        #[test]
        fn $name() {
            bolero::check!().for_each(|input: &[u8]| $target(input));
        }
    };
}

fuzz!(data_stream, thaw_fuzz::data_stream);
fuzz!(data_response, thaw_fuzz::data_response);
fuzz!(journal_record, thaw_fuzz::journal_record);
fuzz!(namespace_load, thaw_fuzz::namespace_load);
fuzz!(path, thaw_fuzz::path);
fuzz!(size, thaw_fuzz::size);
fuzz!(device_model, thaw_fuzz::device_model);
