use kubeforge::custom_resource;

#[custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Ticket", namespaced,
    admission_rule(cel = "object.spec.replica <= 3"),
    admission_rule(cel = "object.metadata.lables['team'] != ''"),
    admission_rule(cel = "request.userInfo.user != 'bob'"),
    admission_rule(cel = "has(oldObject.spec.ownr)"),
    admission_rule(cel = "self.replicas > 0"))]
#[derive(Clone, Debug)]
pub struct TicketSpec {
    pub replicas: i32,
    pub owner: String,
}

fn main() {}
