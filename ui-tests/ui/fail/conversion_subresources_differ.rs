// The versions of a kind must have the same subresources: `kubectl scale` goes through the
// version kubectl prefers, and a version without `scale` answers it with a 404.
#[kubeforge::custom_resource(
    group = "demo.example.com",
    version = "v1",
    kind = "Shop",
    namespaced,
    status = ShopStatus,
    scale(spec = ".spec.replicas", status = ".status.replicas")
)]
#[derive(Clone, Debug)]
pub struct ShopSpec {
    pub replicas: i32,
}

#[kubeforge::schema]
#[derive(Clone, Debug, Default)]
pub struct ShopStatus {
    pub replicas: i32,
}

mod v2 {
    #[kubeforge::custom_resource(
        group = "demo.example.com",
        version = "v2",
        kind = "Shop",
        namespaced,
        status = super::ShopStatus,
        storage = false,
        conversion(hub = super::Shop)
    )]
    #[derive(Clone, Debug)]
    pub struct ShopSpec {
        pub replicas: i32,
    }
}

impl From<Shop> for v2::Shop {
    fn from(shop: Shop) -> Self {
        v2::Shop::new("", v2::ShopSpec { replicas: shop.spec.replicas })
    }
}

impl From<v2::Shop> for Shop {
    fn from(shop: v2::Shop) -> Self {
        Shop::new("", ShopSpec { replicas: shop.spec.replicas })
    }
}

fn main() {}
