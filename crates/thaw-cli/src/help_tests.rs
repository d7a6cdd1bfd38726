//! Every argument of every command says what it is for, and the servers'
//! help offers no client flag.

use clap::CommandFactory;

use crate::Cli;

/// `(command path, argument)` for each argument of `cmd` and its subcommands
/// that has no help text.
fn undocumented(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
    for a in cmd.get_arguments() {
        let builtin = matches!(a.get_id().as_str(), "help" | "version");
        if !builtin && a.get_help().is_none() && a.get_long_help().is_none() {
            out.push(format!("{path}: {}", a.get_id()));
        }
    }
    for sub in cmd.get_subcommands() {
        if sub.get_name() != "help" {
            undocumented(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }
}

fn find<'a>(cmd: &'a clap::Command, path: &[&str]) -> &'a clap::Command {
    path.iter().fold(cmd, |c, name| c.find_subcommand(name).unwrap_or_else(|| panic!("no subcommand {name}")))
}

/// The long flags of `cmd` and every subcommand below it (globals included).
fn long_flags(cmd: &mut clap::Command, out: &mut Vec<String>) {
    out.extend(cmd.get_arguments().filter_map(|a| a.get_long().map(str::to_string)));
    for sub in cmd.get_subcommands_mut() {
        long_flags(sub, out);
    }
}

#[test]
fn every_argument_of_every_command_has_help() {
    let cmd = Cli::command();
    let mut missing = Vec::new();
    undocumented(&cmd, "thaw", &mut missing);
    assert!(missing.is_empty(), "arguments without help:\n{}", missing.join("\n"));
}

#[test]
fn servers_do_not_list_client_flags() {
    let mut cmd = Cli::command();
    cmd.build();
    for (server, allowed) in [("master", &[][..]), ("local", &[][..]), ("worker", &["master"][..])] {
        let mut flags = Vec::new();
        long_flags(cmd.find_subcommand_mut(server).unwrap(), &mut flags);
        for client_flag in ["master", "job"] {
            if !allowed.contains(&client_flag) {
                assert!(!flags.iter().any(|f| f == client_flag), "thaw {server} lists --{client_flag}");
            }
        }
        let help = cmd.find_subcommand_mut(server).unwrap().render_long_help().to_string();
        assert!(!help.contains("--job <"), "thaw {server} --help offers --job:\n{help}");
        if !allowed.contains(&"master") {
            assert!(!help.contains("--master <"), "thaw {server} --help offers --master:\n{help}");
        }
    }
    // The worker's own --master says it is the master it registers with.
    let worker = find(&cmd, &["worker"]);
    let master = worker.get_arguments().find(|a| a.get_long() == Some("master")).unwrap();
    assert!(master.get_help().unwrap().to_string().contains("register"));
    // Client commands, and their subcommands, take both after the command.
    for path in [&["fs", "ls"][..], &["status"], &["migrate"], &["mount"], &["lineage", "ls"]] {
        let mut flags = Vec::new();
        long_flags(&mut find(&cmd, path).clone(), &mut flags);
        assert!(flags.iter().any(|f| f == "master") && flags.iter().any(|f| f == "job"), "{path:?}: {flags:?}");
    }
}

#[test]
fn client_flags_parse_before_and_after_the_command() {
    use clap::Parser;
    let parse = |args: &[&str]| Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let flags = |cli: Cli| -> (Option<String>, Option<String>) {
        let outer = crate::ClientArgs { master: cli.master.clone(), job: cli.job.clone() };
        let inner = match cli.command {
            crate::Command::Fs(g) => g.client,
            crate::Command::Migrate(a) => a.client,
            crate::Command::Mount(a) => a.client,
            _ => crate::ClientArgs::default(),
        };
        let f = inner.or(&outer);
        (f.master, f.job)
    };
    let want = (Some("m:1".to_string()), Some("j".to_string()));
    assert_eq!(flags(parse(&["thaw", "--master", "m:1", "--job", "j", "fs", "ls", "/"])), want);
    assert_eq!(flags(parse(&["thaw", "fs", "ls", "/", "--master", "m:1", "--job", "j"])), want);
    assert_eq!(flags(parse(&["thaw", "fs", "--master", "m:1", "ls", "--job", "j"])), want);
    assert_eq!(flags(parse(&["thaw", "migrate", "--job", "j", "/a", "--master", "m:1"])), want);
    assert_eq!(flags(parse(&["thaw", "--job", "j", "mount", "--master", "m:1", "/mnt"])), want);
    assert!(Cli::try_parse_from(["thaw", "master", "--job", "j", "--ufs", "/u", "--journal-dir", "/j"]).is_err());
    assert!(Cli::try_parse_from(["thaw", "worker", "--master", "m:1", "--mem-dir", "/m"]).is_ok());
}
