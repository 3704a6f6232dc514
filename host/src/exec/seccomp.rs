//! The shell's seccomp filter, laid out as a binary search over system call numbers.
//!
//! Why not one `seccompiler` filter: it emits a linear chain (a compare per listed call, plus
//! its argument checks), ~285 instructions for this list, and installing a filter is not free:
//! the kernel runs it once for every system call number of the architecture to build its
//! allow-cache, so the install costs time proportional to the chain's length times ~450
//! numbers. Measured on this machine kind: 64 µs for a 22-instruction chain, 321 µs for 142,
//! 712 µs for 282, paid by every shell command. Here each number meets ~7 compares
//! (`jge` down a balanced tree, then one `jeq`), so the install is a few tens of µs.
//!
//! What is refused is exactly what the table in docs/decisions.md ("Shell boundary in the
//! kernel", seccomp) says; the unit tests run this program and seccompiler's for every number
//! and a set of arguments through a small BPF interpreter and require the same answers.
//! x32 system calls (numbers with bit 30 set, same audit arch as x86-64) are refused outright;
//! another audit arch (a 32-bit `int 0x80` call) kills the process, as seccompiler does.

/// One classic BPF instruction (`struct sock_filter`), as seccompiler installs it.
pub type Insn = seccompiler::sock_filter;

/// What a listed system call gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Always refused with `EPERM`.
    Deny,
    /// Refused with `ENOSYS` (`clone3`: its flags are behind a pointer, so they cannot be
    /// inspected; the C library falls back to `clone`).
    NoSys,
    /// Refused when argument `arg`'s file type (`& S_IFMT`) is a character or block device.
    DeviceMode { arg: u8 },
    /// Refused when argument `arg` (the low 32 bits) has any of `mask`'s bits.
    AnyFlag { arg: u8, mask: u32 },
    /// Refused when argument `arg` (the low 32 bits) equals `value`.
    Equals { arg: u8, value: u32 },
}

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const AND_K: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

/// Offsets in `struct seccomp_data`.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// The low 32 bits of argument `n` (little-endian: the first word).
fn off_arg(n: u8) -> u32 {
    16 + 8 * u32::from(n)
}

const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const RET_EPERM: u32 = libc::SECCOMP_RET_ERRNO | (libc::EPERM as u32);
const RET_ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | (libc::ENOSYS as u32);
const RET_KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

/// The x32 ABI's bit in the system call number.
const X32_BIT: u32 = 0x4000_0000;

/// The audit architecture of this build, if the filter supports it.
pub fn native_arch() -> Option<u32> {
    match std::env::consts::ARCH {
        "x86_64" => Some(62 | 0x8000_0000 | 0x4000_0000),
        "aarch64" => Some(183 | 0x8000_0000 | 0x4000_0000),
        "riscv64" => Some(243 | 0x8000_0000 | 0x4000_0000),
        _ => None,
    }
}

fn stmt(code: u16, k: u32) -> Insn {
    Insn {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// A jump whose targets are patched once the layout is known.
struct Jump {
    at: usize,
    t: Target,
    f: Target,
}

#[derive(Clone, Copy)]
enum Target {
    /// The next instruction.
    Next,
    /// Instruction index.
    At(usize),
    /// The shared `ret ALLOW` / `ret EPERM` / `ret ENOSYS` at the end.
    Allow,
    Eperm,
    NoSys,
    /// The argument check of the leaf at this instruction index.
    Check(usize),
}

/// Build the filter for `rules` (system call number -> rule) on `arch`.
pub fn build(arch: u32, rules: &[(i64, Rule)]) -> Result<Vec<Insn>, String> {
    let mut rules: Vec<(u32, Rule)> = rules
        .iter()
        .map(|&(nr, r)| {
            u32::try_from(nr)
                .map(|nr| (nr, r))
                .map_err(|_| format!("seccomp: system call number {nr} out of range"))
        })
        .collect::<Result<_, _>>()?;
    rules.sort_by_key(|&(nr, _)| nr);
    if rules.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err("seccomp: a system call is listed twice".into());
    }
    let mut prog: Vec<Insn> = Vec::new();
    let mut jumps: Vec<Jump> = Vec::new();
    let jump = |prog: &mut Vec<Insn>, jumps: &mut Vec<Jump>, code: u16, k: u32, t, f| {
        jumps.push(Jump {
            at: prog.len(),
            t,
            f,
        });
        prog.push(stmt(code, k));
    };
    // Architecture, then the x32 bit.
    prog.push(stmt(LD_W_ABS, OFF_ARCH));
    prog.push(Insn {
        code: JEQ_K,
        jt: 1,
        jf: 0,
        k: arch,
    });
    prog.push(stmt(RET_K, RET_KILL));
    prog.push(stmt(LD_W_ABS, OFF_NR));
    jump(
        &mut prog,
        &mut jumps,
        JGE_K,
        X32_BIT,
        Target::Eperm,
        Target::Next,
    );
    // The tree; each leaf's argument check goes after the tree, in `checks`.
    let mut checks: Vec<(usize, Rule)> = Vec::new();
    tree(&mut prog, &mut jumps, &rules, &mut checks);
    // Argument checks: each starts with its load; the accumulator is reloaded, so the tree's
    // number is not needed any more.
    let mut check_at = Vec::new();
    for (leaf, rule) in &checks {
        check_at.push((*leaf, prog.len()));
        match *rule {
            Rule::DeviceMode { arg } => {
                prog.push(stmt(LD_W_ABS, off_arg(arg)));
                prog.push(stmt(AND_K, libc::S_IFMT));
                jump(
                    &mut prog,
                    &mut jumps,
                    JEQ_K,
                    libc::S_IFCHR,
                    Target::Eperm,
                    Target::Next,
                );
                jump(
                    &mut prog,
                    &mut jumps,
                    JEQ_K,
                    libc::S_IFBLK,
                    Target::Eperm,
                    Target::Allow,
                );
            }
            Rule::AnyFlag { arg, mask } => {
                prog.push(stmt(LD_W_ABS, off_arg(arg)));
                jump(
                    &mut prog,
                    &mut jumps,
                    JSET_K,
                    mask,
                    Target::Eperm,
                    Target::Allow,
                );
            }
            Rule::Equals { arg, value } => {
                prog.push(stmt(LD_W_ABS, off_arg(arg)));
                jump(
                    &mut prog,
                    &mut jumps,
                    JEQ_K,
                    value,
                    Target::Eperm,
                    Target::Allow,
                );
            }
            Rule::Deny | Rule::NoSys => {}
        }
    }
    let allow = prog.len();
    prog.push(stmt(RET_K, RET_ALLOW));
    let eperm = prog.len();
    prog.push(stmt(RET_K, RET_EPERM));
    let enosys = prog.len();
    prog.push(stmt(RET_K, RET_ENOSYS));
    let resolve = |at: usize, t: Target| -> Result<u8, String> {
        let to = match t {
            Target::Next => at + 1,
            Target::At(i) => i,
            Target::Allow => allow,
            Target::Eperm => eperm,
            Target::NoSys => enosys,
            Target::Check(leaf) => check_at
                .iter()
                .find(|(l, _)| *l == leaf)
                .map(|(_, at)| *at)
                .ok_or("seccomp: a leaf without its check")?,
        };
        let off = to
            .checked_sub(at + 1)
            .ok_or("seccomp: a backward jump in the filter")?;
        u8::try_from(off).map_err(|_| "seccomp: the filter is too long for its jumps".to_string())
    };
    for j in &jumps {
        prog[j.at].jt = resolve(j.at, j.t)?;
        prog[j.at].jf = resolve(j.at, j.f)?;
    }
    if prog.len() > usize::from(libc::BPF_MAXINSNS as u16) {
        return Err("seccomp: the filter is too long".into());
    }
    Ok(prog)
}

/// Lay out a balanced tree over `rules` (sorted): `jge` splits, `jeq` leaves; everything not
/// listed falls to `ret ALLOW`.
fn tree(
    prog: &mut Vec<Insn>,
    jumps: &mut Vec<Jump>,
    rules: &[(u32, Rule)],
    checks: &mut Vec<(usize, Rule)>,
) {
    if rules.len() <= 2 {
        for (i, &(nr, rule)) in rules.iter().enumerate() {
            let last = i + 1 == rules.len();
            let hit = match rule {
                Rule::Deny => Target::Eperm,
                Rule::NoSys => Target::NoSys,
                _ => {
                    let leaf = prog.len();
                    checks.push((leaf, rule));
                    Target::Check(leaf)
                }
            };
            jumps.push(Jump {
                at: prog.len(),
                t: hit,
                f: if last { Target::Allow } else { Target::Next },
            });
            prog.push(stmt(JEQ_K, nr));
        }
        if rules.is_empty() {
            jumps.push(Jump {
                at: prog.len(),
                t: Target::Allow,
                f: Target::Allow,
            });
            prog.push(stmt(JEQ_K, 0));
        }
        return;
    }
    let mid = rules.len() / 2;
    let split = prog.len();
    prog.push(stmt(JGE_K, rules[mid].0));
    tree(prog, jumps, &rules[..mid], checks);
    let right = prog.len();
    jumps.push(Jump {
        at: split,
        t: Target::At(right),
        f: Target::Next,
    });
    tree(prog, jumps, &rules[mid..], checks);
}

#[cfg(test)]
#[path = "seccomp_tests.rs"]
pub(crate) mod tests;
