use super::*;
use pretty_assertions::assert_eq;

#[test]
fn durations_read_in_the_unit_that_fits() {
    let cases = [
        (0, "0.0 ms"),
        (4_200, "4.2 ms"),
        (12_345, "12 ms"),
        (999_999, "999 ms"),
        (1_400_000, "1.4 s"),
        (125_000_000, "2 min 05 s"),
    ];
    for (us, want) in cases {
        assert_eq!(duration(us), want, "{us} µs");
    }
}

#[test]
fn utc_time_counts_days_across_leap_years_and_before_1970() {
    let cases = [
        (0, "1970-01-01 00:00:00"),
        (951_782_400_000, "2000-02-29 00:00:00"),
        (1_709_251_199_000, "2024-02-29 23:59:59"),
        (1_798_761_600_000, "2027-01-01 00:00:00"),
        (-1_000, "1969-12-31 23:59:59"),
    ];
    for (ms, want) in cases {
        assert_eq!(utc_time(ms), want, "{ms} ms");
    }
}

#[test]
fn hostile_cells_stay_on_one_line() {
    for s in ["a\nb", "\u{1b}[31mred", "x\r", "\u{202e}txt", ""] {
        let cell = shown(s);
        assert!(!cell.chars().any(char::is_control), "{cell:?}");
        assert!(!cell.is_empty());
    }
    assert_eq!(shown("edit:src/a.rs"), "edit:src/a.rs");
}
