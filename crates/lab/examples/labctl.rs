//! A tiny driver for trying the lab by hand:
//! `labctl up NAME [HOSTS,..] [QUEUES]`, `labctl down NAME`, `labctl status NAME`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = args.get(1).cloned().unwrap_or_else(|| "try".into());
    let result = match args.first().map(String::as_str) {
        Some("up") => {
            let mut spec = lab::LabSpec::new(&name);
            if let Some(hosts) = args.get(2) {
                spec.hosts = hosts.split(',').map(str::to_string).collect();
            }
            if let Some(q) = args.get(3).and_then(|q| q.parse().ok()) {
                spec.queues = q;
            }
            lab::Lab::up(&spec).map(|_| ())
        }
        Some("down") => lab::Lab::down(&name),
        Some("status") => lab::Lab::status(&name)
            .map(|s| println!("{}", serde_json::to_string_pretty(&s).unwrap_or_default())),
        _ => {
            eprintln!("usage: labctl up|down|status NAME [HOSTS] [QUEUES]");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(if e.is_environment() { 3 } else { 2 });
    }
}
