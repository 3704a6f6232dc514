//! The confinement's attack tests again, each in a child run as nobody, as root without
//! `CAP_SYS_ADMIN`, and as nobody with user namespaces refused (see modes.rs): the boundary
//! must hold for whoever runs the host, not only for the privileged root CI runs as.
//!
//! `in_modes!(module::test)` makes `unprivileged::module::test::{as_nobody,
//! as_root_without_caps, without_userns}`; `prepare = f` runs `f(mode)` first, here, as root
//! (installing what the child cannot). One of them, alone:
//!
//! ```sh
//! cargo test -p toolgate-integration --test integration -- --exact \
//!     unprivileged::shell_kernel::confined_root_has_no_capabilities::as_nobody
//! ```

/// Three wrappers of `$module::$test`, one per [`crate::modes::Mode`].
macro_rules! in_modes {
    ($module:ident :: $test:ident) => {
        in_modes!($module::$test, prepare = crate::modes::nothing);
    };
    ($module:ident :: $test:ident, prepare = $prepare:path) => {
        in_modes!(@wrap $test, stringify!($module), $prepare);
    };
    // A test in a nested module: `in_modes!(in hostile::egress, test_name)`.
    (in $first:ident $(:: $rest:ident)* , $test:ident) => {
        in_modes!(
            @wrap $test,
            concat!(stringify!($first) $(, "::", stringify!($rest))*),
            crate::modes::nothing
        );
    };
    (@wrap $test:ident, $module:expr, $prepare:path) => {
        mod $test {
            use crate::modes::{run_prepared, Mode};

            const TEST: &str = concat!($module, "::", stringify!($test));

            // A renamed test fails its wrappers: the child must pass exactly one test.
            fn run(mode: Mode) {
                run_prepared(mode, TEST, $prepare);
            }

            #[test]
            fn as_nobody() {
                run(Mode::Nobody);
            }

            #[test]
            fn as_root_without_caps() {
                run(Mode::RootWithoutCaps);
            }

            #[test]
            fn without_userns() {
                run(Mode::NobodyWithoutUserns);
            }
        }
    };
}

/// `toolgate doctor` tells the truth in each mode: the mode it names is the one commands get,
/// and a policy requiring confinement is refused exactly where a layer is missing.
mod doctor {
    in_modes!(doctor::doctor_names_every_layer_and_the_mode);
    in_modes!(doctor::a_policy_requiring_confinement_exits_1_exactly_when_the_shell_is_refused);
}

/// The runner itself: the check it runs before every test passes on its own, a failing test
/// fails its wrapper with the child's output, and a name that matches no test fails too.
mod runner {
    use crate::modes::{try_run_in, Mode, RunError};

    in_modes!(modes::mode_is_in_effect);

    fn expect_failure(mode: Mode, test: &str, needle: &str) {
        match try_run_in(mode, test) {
            Ok(took) => panic!("{test} as {} passed ({took})", mode.name()),
            Err(RunError::Unavailable(why)) => crate::modes::unavailable(mode, test, &why),
            Err(RunError::Failed(out)) => assert!(out.contains(needle), "{out}"),
        }
    }

    #[test]
    fn a_failing_test_fails_its_wrapper_with_the_childs_output() {
        for mode in Mode::ALL {
            expect_failure(
                mode,
                "modes::fails_in_a_child_run",
                &format!("meant to fail as {}", mode.name()),
            );
        }
    }

    #[test]
    fn a_name_that_matches_no_test_fails() {
        expect_failure(Mode::Nobody, "modes::no_such_test", "0 passed");
        // A prefix is not the test: `--exact`.
        expect_failure(Mode::Nobody, "modes::mode_is_in", "0 passed");
    }
}

mod shell_kernel {
    in_modes!(shell_kernel::the_observation_reports_every_layer_and_require_confinement_runs);
    in_modes!(shell_kernel::secrets_and_host_state_are_absent_from_the_shell);
    in_modes!(shell_kernel::confined_root_has_no_capabilities);
    in_modes!(shell_kernel::a_device_node_cannot_be_made);
    in_modes!(shell_kernel::a_host_process_cannot_be_signalled);
    in_modes!(shell_kernel::a_double_forked_setsid_child_does_not_outlive_the_call);
    in_modes!(shell_kernel::host_unix_sockets_and_tmp_are_unreachable);
    in_modes!(shell_kernel::git_internals_cannot_be_subverted_from_inside);
    in_modes!(shell_kernel::the_clock_cannot_be_set);
    in_modes!(shell_kernel::a_misclassified_read_only_command_cannot_write);
    in_modes!(
        shell_kernel::cargo_test_and_python_tests_pass_confined,
        prepare = crate::modes::system_cargo
    );
    in_modes!(shell_kernel::home_is_private_with_toolchains_read_only);
    in_modes!(shell_kernel::the_workspace_root_takes_no_new_file_in_landlock_only_mode);
    in_modes!(shell_kernel::probe_matches_this_machine);
    in_modes!(
        shell_kernel::concurrent_commands_do_not_reach_each_other_through_the_network_namespace
    );
}

/// The process limit (a fork bomb), writes outside, loopback, timeouts and the spawner.
mod shell {
    in_modes!(shell::process_count_is_limited);
    in_modes!(shell::a_command_too_large_for_the_spawner_still_has_a_process_limit);
    in_modes!(shell::confinement_blocks_writes_outside_and_to_protected_paths);
    in_modes!(shell::confinement_blocks_loopback_network_and_scrubs_env);
    in_modes!(shell::timeout_kills_the_process_group);
    in_modes!(shell::a_killed_spawner_is_replaced_and_never_hangs_a_call);
}

/// Egress through the host's proxy only.
mod shell_network {
    in_modes!(shell_network::an_allowed_server_is_reached_and_an_unlisted_port_is_refused_headless);
    in_modes!(shell_network::a_private_address_is_refused_without_allow_private_even_when_listed);
    in_modes!(shell_network::a_redirect_to_a_host_not_on_the_list_is_refused_at_the_proxy);
    in_modes!(shell_network::a_net_grant_allows_an_unlisted_host_and_limited_refuses_a_post);
    in_modes!(shell_network::a_person_is_asked_for_net_and_a_session_answer_is_kept);
    in_modes!(shell_network::read_only_commands_and_untrusted_lists_get_no_network);
}

/// Language servers run confined too.
mod lsp {
    in_modes!(
        lsp::diagnostics_show_the_error_then_clean_once_edit_fixes_it_and_edit_can_append_them,
        prepare = crate::modes::pylsp
    );
    in_modes!(
        lsp::definition_references_and_symbols_on_a_small_project,
        prepare = crate::modes::pylsp
    );
    in_modes!(
        lsp::a_rename_across_two_files_is_shown_as_a_diff_applied_whole_and_refused_when_stale,
        prepare = crate::modes::pylsp
    );
    in_modes!(
        lsp::the_tools_that_write_are_capped_at_session_scope,
        prepare = crate::modes::pylsp
    );
    in_modes!(
        lsp::a_killed_server_is_started_again_and_the_answer_says_so,
        prepare = crate::modes::pylsp
    );
    in_modes!(lsp::a_server_that_hangs_or_floods_is_bounded_by_the_call);
}

/// The hostile guest, whose component a child reads from a copy when it must.
mod attacks {
    in_modes!(attacks::hostile_guest_cannot_escape_its_preopen);
}
