use kubeforge::custom_resource;

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Ticket", namespaced,
    admission_rule(cel = "object.spec.owner ==", message = "does not parse"),
    admission_rule(cel = "object.spec.owner", reason = "Conflict"),
    admission_rule(cel = "object.spec.owner != ''", operations = ["CREATE", "PATCH", "CREATE"]),
    admission_rule(cel = "true", message_expression = "object.spec.replicas"),
    admission_policy(validation_actions = ["Deny", "Warn"], namespace_selector = "team in ()"))]
#[derive(Clone, Debug)]
pub struct TicketSpec {
    pub replicas: i32,
    pub owner: String,
}

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Board", cluster,
    admission_policy(namespace_selector = "team=a"))]
#[derive(Clone, Debug)]
pub struct BoardSpec {
    pub name: String,
}

fn main() {}
