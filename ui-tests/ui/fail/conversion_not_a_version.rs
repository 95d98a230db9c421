// `conversion(hub = ..)` must name the storage version of the same kind: here another kind.
#[kubeforge::custom_resource(group = "demo.example.com", version = "v2", kind = "Shop", namespaced)]
#[derive(Clone, Debug)]
pub struct ShopSpec {
    pub image: String,
}

#[kubeforge::custom_resource(
    group = "demo.example.com",
    version = "v1",
    kind = "Site",
    namespaced,
    storage = false,
    conversion(hub = Shop)
)]
#[derive(Clone, Debug)]
pub struct SiteSpec {
    pub image: String,
}

impl From<Site> for Shop {
    fn from(site: Site) -> Self {
        Shop::new("", ShopSpec { image: site.spec.image })
    }
}

impl From<Shop> for Site {
    fn from(shop: Shop) -> Self {
        Site::new("", SiteSpec { image: shop.spec.image })
    }
}

fn main() {}
