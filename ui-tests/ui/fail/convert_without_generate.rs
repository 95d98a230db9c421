// `#[convert(from = "..")]` renames a field for generated conversions: without
// `conversion(hub = .., generate)` nothing would use it.
mod v2 {
    #[kubeforge::custom_resource(group = "demo.example.com", version = "v2", kind = "Shop", namespaced)]
    #[derive(Clone, Debug)]
    pub struct ShopSpec {
        pub image: String,
        pub replicas: i32,
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
    #[convert(from = "replicas")]
    pub instances: i32,
    #[convert(to = "x")]
    pub other: i32,
}

impl From<Shop> for v2::Shop {
    fn from(shop: Shop) -> Self {
        v2::Shop::new("", v2::ShopSpec { image: shop.spec.image, replicas: shop.spec.instances })
    }
}

impl From<v2::Shop> for Shop {
    fn from(shop: v2::Shop) -> Self {
        Shop::new("", ShopSpec { image: shop.spec.image, instances: shop.spec.replicas, other: 0 })
    }
}

fn main() {}
