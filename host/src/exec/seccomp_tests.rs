//! Unit tests of `exec/seccomp.rs`.
#![allow(clippy::unwrap_used)]

use super::*;

/// Run a classic BPF seccomp program on `(arch, nr, args)`.
pub(crate) fn run(prog: &[Insn], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
    let mut data = [0u8; 64];
    data[0..4].copy_from_slice(&nr.to_le_bytes());
    data[4..8].copy_from_slice(&arch.to_le_bytes());
    for (i, a) in args.iter().enumerate() {
        data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
    }
    let word = |off: u32| {
        let o = off as usize;
        u32::from_le_bytes([data[o], data[o + 1], data[o + 2], data[o + 3]])
    };
    let (mut pc, mut acc) = (0usize, 0u32);
    for _ in 0..10_000 {
        let i = &prog[pc];
        let class = u32::from(i.code) & 0x07;
        match class {
            c if c == libc::BPF_LD => {
                acc = word(i.k);
                pc += 1;
            }
            c if c == libc::BPF_ALU => {
                assert_eq!(u32::from(i.code) & 0xf0, libc::BPF_AND, "{i:?}");
                acc &= i.k;
                pc += 1;
            }
            c if c == libc::BPF_JMP => {
                let op = u32::from(i.code) & 0xf0;
                let taken = match op {
                    o if o == libc::BPF_JEQ => acc == i.k,
                    o if o == libc::BPF_JGE => acc >= i.k,
                    o if o == libc::BPF_JGT => acc > i.k,
                    o if o == libc::BPF_JSET => acc & i.k != 0,
                    o if o == libc::BPF_JA => {
                        pc += 1 + i.k as usize;
                        continue;
                    }
                    _ => panic!("unexpected jump {i:?}"),
                };
                pc += 1 + usize::from(if taken { i.jt } else { i.jf });
            }
            c if c == libc::BPF_RET => return i.k,
            _ => panic!("unexpected instruction {i:?}"),
        }
    }
    panic!("the program did not return");
}

/// The kernel's combination of several filters: the most restrictive action wins; among
/// equal actions, the most recently installed filter's.
pub(crate) fn run_all(progs: &[&[Insn]], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
    let mut best: Option<u32> = None;
    for p in progs.iter().rev() {
        let r = run(p, arch, nr, args);
        let action = |v: u32| (v & libc::SECCOMP_RET_ACTION_FULL) as i32;
        best = match best {
            Some(b) if action(r) >= action(b) => Some(b),
            _ => Some(r),
        };
    }
    best.unwrap_or(RET_ALLOW)
}

#[test]
fn a_filter_without_rules_allows_everything_native_and_refuses_x32() {
    let arch = 0xC000_003E;
    let p = build(arch, &[]).unwrap();
    assert_eq!(run(&p, arch, 0, [0; 6]), RET_ALLOW);
    assert_eq!(run(&p, arch, 400, [0; 6]), RET_ALLOW);
    assert_eq!(run(&p, arch, X32_BIT | 1, [0; 6]), RET_EPERM);
    assert_eq!(run(&p, 0x4000_0003, 1, [0; 6]), RET_KILL);
}

#[test]
fn every_rule_kind_answers_as_written() {
    let arch = 0xC000_003E;
    let rules: Vec<(i64, Rule)> = (0..60)
        .map(|i| {
            let r = match i % 5 {
                0 => Rule::Deny,
                1 => Rule::DeviceMode { arg: 1 },
                2 => Rule::AnyFlag { arg: 0, mask: 0x10 },
                3 => Rule::Equals { arg: 2, value: 7 },
                _ => Rule::NoSys,
            };
            (i * 7 + 3, r)
        })
        .collect();
    let p = build(arch, &rules).unwrap();
    for nr in 0..450u32 {
        let listed = rules.iter().find(|(n, _)| *n == i64::from(nr)).map(|r| r.1);
        for args in [
            [0u64; 6],
            [0x10, u64::from(libc::S_IFCHR), 7, 0, 0, 0],
            [0x1_0000_0000, u64::from(libc::S_IFREG), 8, 0, 0, 0],
            [0, u64::from(libc::S_IFBLK | 0o644), 0x1_0000_0007, 0, 0, 0],
        ] {
            let want = match listed {
                None => RET_ALLOW,
                Some(Rule::Deny) => RET_EPERM,
                Some(Rule::NoSys) => RET_ENOSYS,
                Some(Rule::DeviceMode { arg }) => {
                    let t = (args[arg as usize] as u32) & libc::S_IFMT;
                    if t == libc::S_IFCHR || t == libc::S_IFBLK {
                        RET_EPERM
                    } else {
                        RET_ALLOW
                    }
                }
                Some(Rule::AnyFlag { arg, mask }) => {
                    if (args[arg as usize] as u32) & mask != 0 {
                        RET_EPERM
                    } else {
                        RET_ALLOW
                    }
                }
                Some(Rule::Equals { arg, value }) => {
                    if args[arg as usize] as u32 == value {
                        RET_EPERM
                    } else {
                        RET_ALLOW
                    }
                }
            };
            assert_eq!(run(&p, arch, nr, args), want, "nr {nr} args {args:?}");
        }
    }
}

#[test]
fn each_number_meets_a_short_path() {
    let arch = 0xC000_003E;
    let rules: Vec<(i64, Rule)> = (0..48).map(|i| (i * 9, Rule::Deny)).collect();
    let p = build(arch, &rules).unwrap();
    // 48 listed calls: a handful of header instructions, ~6 splits, 1-2 leaves.
    assert!(p.len() < 120, "{} instructions", p.len());
}
