// The versions of one kind share one CRD, hence one set of names: a `shortname` on the hub only
// is reported at compile time (issue #31), not when the CRDs are merged at startup.
mod v2 {
    #[kubeforge::custom_resource(
        group = "demo.example.com",
        version = "v2",
        kind = "Shop",
        namespaced,
        shortname = "sh"
    )]
    #[derive(Clone, Debug)]
    pub struct ShopSpec {
        pub image: String,
    }
}

#[kubeforge::custom_resource(
    group = "demo.example.com",
    version = "v1",
    kind = "Shop",
    namespaced,
    storage = false,
    conversion(hub = v2::Shop, generate)
)]
#[derive(Clone, Debug)]
pub struct ShopSpec {
    pub image: String,
}

fn main() {}
