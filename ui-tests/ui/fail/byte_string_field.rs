use kubeforge::k8s_openapi::ByteString;

#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Secretish {
    pub data: std::collections::BTreeMap<String, ByteString>,
}

fn main() {}
