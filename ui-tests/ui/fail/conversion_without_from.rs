// `conversion(hub = ..)` converts through `TryFrom` both ways (`From` gives it): missing impls are
// reported at the hub.
mod v2 {
    #[kubeforge::custom_resource(group = "demo.example.com", version = "v2", kind = "Shop", namespaced)]
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
    conversion(hub = v2::Shop)
)]
#[derive(Clone, Debug)]
pub struct ShopSpec {
    pub image: String,
}

fn main() {}
