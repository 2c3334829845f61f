//! The lines that say where and how a result set was measured: the machine, and the runs' order.

use std::collections::BTreeMap;

use figures::units;

/// The machine a result set was measured on, as host.json records it: "AMD EPYC (microcode
/// 0x1000065), 2 CPUs, 23.5 GiB, virtual, kernel 6.1.0-28-cloud-amd64, root disk vda (…)".
pub fn machine_line(host: &BTreeMap<String, String>) -> Option<String> {
    let model = host.get("machine.cpu_model")?;
    let mut parts = vec![match host.get("machine.microcode") {
        Some(code) => format!("{model} (microcode {code})"),
        None => model.clone(),
    }];
    parts.extend(host.get("machine.cpus").map(|n| format!("{n} CPUs")));
    parts.extend(host.get("machine.memory").and_then(|m| m.parse::<f64>().ok()).map(|b| units::human(b, "B")));
    parts.extend(host.get("machine.product").cloned());
    parts.extend((host.get("machine.virtual").map(String::as_str) == Some("true")).then(|| "virtual".to_string()));
    parts.extend(host.get("kernel.release").map(|k| format!("kernel {k}")));
    parts.extend(host.get("machine.root_disk").map(|d| format!("root disk {d}")));
    // A figure measured with the idle CPUs polling is not the one the machine gives as it idles.
    parts.extend(
        crate::sys::cpu_idle::held_polling(host)
            .then(|| "idle CPUs polling through the run (cpu_idle = \"poll\")".to_string()),
    );
    Some(parts.join(", "))
}

/// How the runs were ordered: "Order: shuffled within each round (seed 123, `--seed 123` replays it)".
pub fn order_line(plan: &crate::store::PlanRecord) -> String {
    match (plan.order, plan.seed) {
        (crate::store::Order::Shuffled, Some(seed)) => {
            format!("Order: shuffled within each round (seed {seed}; --seed {seed} replays it)")
        }
        _ => "Order: fixed, every round as the suite lists its cells: a cell that always follows the same one cannot be told from what that one leaves behind".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_line_says_when_the_idle_cpus_polled() {
        let host = |limit: &str| {
            [("machine.cpu_model", "Xeon"), ("machine.cpus", "2"), ("cpu.idle_latency_limit", limit)]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into()
        };
        let polled = machine_line(&host(crate::sys::cpu_idle::POLLING)).unwrap();
        assert_eq!(polled, "Xeon, 2 CPUs, idle CPUs polling through the run (cpu_idle = \"poll\")");
        assert_eq!(machine_line(&host("none")).unwrap(), "Xeon, 2 CPUs");
        let asked = machine_line(&host(crate::sys::cpu_idle::NOT_HONOURED)).unwrap();
        assert_eq!(asked, "Xeon, 2 CPUs", "asked where no cpuidle driver honours it: not polled");
    }
}
