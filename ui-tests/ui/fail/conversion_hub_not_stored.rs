// The hub of `conversion(hub = ..)` must be another version of the kind, and its storage version.
mod v2 {
    #[kubeforge::custom_resource(
        group = "demo.example.com",
        version = "v2",
        kind = "Shop",
        namespaced,
        storage = false
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
    conversion(hub = v2::Shop)
)]
#[derive(Clone, Debug)]
pub struct ShopSpec {
    pub image: String,
}

mod v3 {
    #[kubeforge::custom_resource(
        group = "demo.example.com",
        version = "v3",
        kind = "Shop",
        namespaced,
        storage = false,
        conversion(hub = Shop)
    )]
    #[derive(Clone, Debug)]
    pub struct ShopSpec {
        pub image: String,
    }
}

impl From<Shop> for v2::Shop {
    fn from(shop: Shop) -> Self {
        v2::Shop::new("", v2::ShopSpec { image: shop.spec.image })
    }
}

impl From<v2::Shop> for Shop {
    fn from(shop: v2::Shop) -> Self {
        Shop::new("", ShopSpec { image: shop.spec.image })
    }
}

fn main() {}
