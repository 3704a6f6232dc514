//! Placeholder: filled by the #19 work (part 2 langs, part 3 oci, part 4 trace).
